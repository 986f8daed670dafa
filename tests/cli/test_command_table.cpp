// The command table: every command is registered, listed in `perfsim --help` with its summary,
// named in the hint of an unknown command, and parses its own --help; the defaults its help
// shows are the lower layers' constants.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cmd_validate.hpp"
#include "cli/command_table.hpp"
#include "cli/subcommands.hpp"
#include "core/run/runner.hpp"

using namespace perfsim;

TEST_CASE("command table: every command is listed in --help with its summary") {
  std::vector<Command> commands = make_commands();
  const auto app = make_app(commands);
  const std::string help = app->help();
  std::set<std::string> names;
  for (const Command& c : commands) {
    CAPTURE(c.name);
    CHECK(names.insert(c.name).second);
    REQUIRE(c.app != nullptr);
    CHECK(c.app->get_name() == c.name);
    CHECK(help.find("  " + c.name + " ") != std::string::npos);
    CHECK(help.find(c.summary) != std::string::npos);
    CHECK(c.add_options);
    CHECK(c.run);
    CHECK(c.common);
  }
  CHECK(names == std::set<std::string>{"run", "list", "explain", "search", "calibrate", "validate", "plot"});
}

TEST_CASE("command table: the hint names every command once, in its own order") {
  const std::vector<Command> commands = make_commands();
  CHECK(hint_names(commands) ==
        std::vector<std::string>{"run", "list", "explain", "search", "calibrate", "validate", "plot"});
  std::vector<int> positions;
  for (const Command& c : commands) positions.push_back(c.hint_position);
  std::sort(positions.begin(), positions.end());
  for (std::size_t i = 0; i < positions.size(); ++i) CHECK(positions[i] == static_cast<int>(i));
}

TEST_CASE("command table: each command parses its --help, and reads what run_cli needs") {
  for (const std::string& name : hint_names(make_commands())) {
    CAPTURE(name);
    std::vector<Command> commands = make_commands();
    const auto app = make_app(commands);
    std::vector<std::string> args = {"--help", name};  // CLI11 takes them last first
    CHECK_THROWS_AS(app->parse(args), CLI::CallForHelp);
    const auto c = std::find_if(commands.begin(), commands.end(), [&](const Command& c) { return c.name == name; });
    REQUIRE(c != commands.end());
    CHECK(c->app->parsed());
    // Only run and validate run on several ranks; run and explain list a script's options.
    CHECK(c->runs_on_ranks == (name == "run" || name == "validate"));
    CHECK((c->common().script_help != nullptr) == (name == "run" || name == "explain"));
  }
}

TEST_CASE("command table: the time limits' defaults are the ones the layers below state") {
  CHECK(RunArgs{}.timeout == DslSettings{}.timeout_s);
  CHECK(ValidateArgs{}.timeout == default_script_timeout_s);
  CHECK(RunArgs{}.rank_timeout == RunnerHooks{}.rank_timeout_s);
  CHECK(ValidateArgs{}.rank_timeout == default_rank_timeout_s);
  CHECK(RunOptions{}.repeats == ExecuteOptions{}.repeats);
  CHECK(RunOptions{}.warmup == ExecuteOptions{}.warmup);
  std::vector<Command> commands = make_commands();
  const auto app = make_app(commands);
  for (const char* name : {"run", "validate"}) {
    CAPTURE(name);
    const std::string help = app->get_subcommand(name)->help();
    CHECK(help.find(fmt::format("--timeout SECONDS={}", default_script_timeout_s)) != std::string::npos);
    CHECK(help.find(fmt::format("NONNEGATIVE={}", default_rank_timeout_s)) != std::string::npos);
  }
}
