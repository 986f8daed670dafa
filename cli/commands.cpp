// The perfsim command line: parses it against the command table (command_table.hpp), runs the
// command it names, and is the single place where exceptions become "perfsim: error: ..." and
// an exit code (1 failure, 2 usage).
#include "cli/commands.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "backends/mpi/mpi_world.hpp"
#include "cli/command_table.hpp"
#include "cli/ranks.hpp"
#include "cli/subcommands.hpp"
#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"
#include "core/text.hpp"
#include "core/version.hpp"

namespace perfsim {

namespace {

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

void print_error(const std::string& message) {
  fmt::print(stderr, "perfsim: error: {}\n", message);
  std::fflush(stderr);
}

int usage_error(const std::string& message) {
  print_error(message);
  std::fputs("Run 'perfsim --help' (or 'perfsim COMMAND --help') for usage.\n", stderr);
  return exit_usage;
}

// "run, list, ... or plot"
std::string choices(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// CLI11 reports a missing or misspelt command as "A subcommand is required"; this says which
// commands there are, or that an option belongs after the command. "" when argv[1] is fine.
std::string first_argument_problem(int argc, char** argv, const std::vector<Command>& commands) {
  const std::vector<std::string> names = hint_names(commands);
  if (argc < 2) return "no command given; choose " + choices(names);
  const std::string first = argv[1];
  if (!first.empty() && first.front() != '-' && std::find(names.begin(), names.end(), first) == names.end())
    return fmt::format("unknown command '{}'{}; choose {}", first, did_you_mean(first, names), choices(names));
  if (first.size() > 1 && first.front() == '-') {
    const std::vector<std::string> flags = {"--help", "-h", "--help-all", "--version"};
    if (std::find(flags.begin(), flags.end(), first) == flags.end()) {
      const std::string hint = did_you_mean(first, flags);
      return fmt::format(
          "unknown option '{}'{}", first,
          hint.empty() ? "; a command's options go after it: perfsim run SCENARIO --backend none" : hint);
    }
  }
  return "";
}

// "--backend", "-o", ... of one command.
std::vector<std::string> option_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
  }
  return names;
}

// The first argument after the command that looks like an option and is none of its options.
std::string unknown_option(const CLI::App& cmd, int argc, char** argv) {
  const std::vector<std::string> names = option_names(cmd);
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg.front() != '-') continue;
    if (const auto eq = arg.find('='); eq != std::string::npos) arg.resize(eq);
    // -q and -o (possibly glued to a value: -ofile) are short options.
    const std::string short_name = arg.size() > 2 && arg[1] != '-' ? arg.substr(0, 2) : arg;
    if (std::find(names.begin(), names.end(), short_name) == names.end()) return arg;
  }
  return "";
}

const Command* parsed_command(const std::vector<Command>& commands) {
  for (const Command& c : commands)
    if (c.app->parsed()) return &c;
  return nullptr;
}

// Parses the command line; nullopt when a command is to run, else the exit code of what parsing
// already did (help, the version, a usage error).
std::optional<int> parse(CLI::App& app, const std::vector<Command>& commands, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    // `run SCRIPT --help` and `explain SCRIPT --help` also list the script's options.
    const Command* c = parsed_command(commands);
    const ScriptArgs* script = c != nullptr ? c->common().script_help : nullptr;
    if (script != nullptr && !script->scenario.empty()) {
      std::fputs("\n", stdout);
      std::fflush(stdout);
      try {
        std::fputs(describe_script_options(*script).c_str(), stdout);
      } catch (const std::exception& e) {
        print_error(e.what());
        return exit_failure;
      }
    }
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    fmt::print("perfsim {}\n", perfsim_version);
    return 0;
  } catch (const CLI::ExtrasError& e) {
    // CLI11 lists stray arguments (in reverse order); a misspelt option deserves a suggestion.
    const Command* c = parsed_command(commands);
    const std::string unknown = c != nullptr ? unknown_option(*c->app, argc, argv) : "";
    if (unknown.empty()) return usage_error(e.what());
    return usage_error(fmt::format("unknown option '{}' for perfsim {}{}", unknown, c->name,
                                   did_you_mean(unknown, option_names(*c->app))));
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
}

// Runs the parsed command, as one of several ranks where a launcher started them.
int run_command(const Command& command, const CommonArgs& common, int argc, char** argv) {
  if (common.gpus > 1 && launcher_world_size() == 1) return relaunch_on_ranks(common.gpus, argc, argv);
  Communicator* ranks = launched_ranks();
  if (ranks == nullptr) return command.run();
  if (!command.runs_on_ranks)
    throw UsageError("only `perfsim run` and `perfsim validate` run as several ranks (mpirun, srun, --gpus)");
  if (common.gpus > 1 && common.gpus != ranks->size())
    throw UsageError(fmt::format("--gpus {} under a launcher of {} ranks: drop --gpus", common.gpus, ranks->size()));
  try {
    return command.run();
  } catch (const std::exception& e) {
    abort_ranks(*ranks, e.what(), exit_failure);
  }
}

}  // namespace

int run_cli(int argc, char** argv) {
  // An interrupted write leaves no temporary file behind (core/files.hpp).
  remove_temporary_files_on_signals();
  std::vector<Command> commands = make_commands();
  const std::unique_ptr<CLI::App> app = make_app(commands);
  if (const std::string problem = first_argument_problem(argc, argv, commands); !problem.empty())
    return usage_error(problem);
  if (const std::optional<int> done = parse(*app, commands, argc, argv)) return *done;

  const Command* command = parsed_command(commands);
  if (command == nullptr) {
    print_error("no command given");
    return exit_usage;
  }
  const CommonArgs common = command->common();
  if (common.unsafe) {
    fmt::print(stderr, "perfsim: warning: unsafe: scripts run without the sandbox (--unsafe)\n");
    std::fflush(stderr);
  }
  // --run-timeout: the loops that run long stop at their next check; work that reaches no check
  // (a kernel, a library call) ends the process 10 s later, its temporary files removed.
  const std::string run_limit_text = fmt::format("the command ran longer than --run-timeout {} s", common.run_timeout);
  HardStop run_hard_stop;
  run_hard_stop.grace_s = 10;
  run_hard_stop.message = [run_limit_text] {
    return run_limit_text + " and did not stop at a check; stopped the process";
  };
  const DeadlineScope run_limit(common.run_timeout, run_limit_text + " (raise --run-timeout or ask for less work)",
                                std::move(run_hard_stop));
  try {
    return run_command(*command, common, argc, argv);
  } catch (const UsageError& e) {
    print_error(e.what());
    return exit_usage;
  } catch (const std::exception& e) {
    // ConfigError, NotExecutable, ScriptError (its traceback follows on the next lines) and
    // anything else: one clear line, never a crash.
    std::fflush(stdout);
    print_error(e.what());
    return exit_failure;
  } catch (...) {
    print_error("unexpected failure (not a standard exception)");
    return exit_failure;
  }
}

}  // namespace perfsim
