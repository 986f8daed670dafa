// The command table and the top-level parser built from it. Each entry owns its arguments, which
// its options fill while the command line is parsed and its function then reads.
#include "cli/command_table.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cmd_calibrate.hpp"
#include "cli/cmd_plot.hpp"
#include "cli/cmd_validate.hpp"
#include "cli/subcommands.hpp"
#include "core/version.hpp"

namespace perfsim {

namespace {

// One entry, written with the types of its own arguments.
template <class Args>
struct CommandSpec {
  const char* name;
  const char* summary;
  int hint_position;
  bool runs_on_ranks = false;
  void (*add_options)(CLI::App&, Args&);
  int (*run)(const Args&);
  CommonArgs (*common)(const Args&) = nullptr;
};

template <class Args>
Command make_command(const CommandSpec<Args>& spec) {
  auto args = std::make_shared<Args>();
  Command c;
  c.name = spec.name;
  c.summary = spec.summary;
  c.hint_position = spec.hint_position;
  c.runs_on_ranks = spec.runs_on_ranks;
  c.add_options = [args, add = spec.add_options](CLI::App& cmd) { add(cmd, *args); };
  c.common = [args, common = spec.common] { return common != nullptr ? common(*args) : CommonArgs{}; };
  c.run = [args, run = spec.run] { return run(*args); };
  return c;
}

}  // namespace

std::vector<Command> make_commands() {
  return {
      make_command(CommandSpec<RunArgs>{
          .name = "run",
          .summary = "Predict and measure a Lua scenario, step by step through its optimization stack.",
          .hint_position = 0,
          .runs_on_ranks = true,
          .add_options = add_run_options,
          .run = cmd_run,
          .common =
              [](const RunArgs& a) {
                return CommonArgs{.script_help = &a, .unsafe = a.unsafe, .run_timeout = a.run_timeout, .gpus = a.gpus};
              }}),
      make_command(CommandSpec<ListArgs>{
          .name = "list",
          .summary = "List the hardware catalog, the model zoo, the optimizations or the calibrated profiles.",
          .hint_position = 1,
          .add_options = add_list_options,
          .run = cmd_list}),
      make_command(CommandSpec<ExplainArgs>{
          .name = "explain",
          .summary = "Show one optimization step's roofline op by op: FLOPs, bytes, bound, time.",
          .hint_position = 2,
          .add_options = add_explain_options,
          .run = cmd_explain,
          .common =
              [](const ExplainArgs& a) {
                return CommonArgs{.script_help = &a, .unsafe = a.unsafe, .run_timeout = a.run_timeout};
              }}),
      make_command(CommandSpec<CalibrateArgs>{
          .name = "calibrate",
          .summary = "Measure this machine with microbenchmarks and write a calibrated hardware profile (Lua).",
          .hint_position = 4,
          .add_options = add_calibrate_options,
          .run = cmd_calibrate}),
      make_command(CommandSpec<ValidateArgs>{
          .name = "validate",
          .summary = "Run the validation suite on a backend and report prediction errors (per op, step time, "
                     "speedups, memory; collectives when the backend spans 2 or more GPUs).",
          .hint_position = 5,
          .runs_on_ranks = true,
          .add_options = add_validate_options,
          .run = cmd_validate,
          .common = [](const ValidateArgs& a) { return CommonArgs{.unsafe = a.unsafe, .gpus = a.gpus}; }}),
      make_command(CommandSpec<PlotArgs>{
          .name = "plot",
          .summary = "Draw charts of a saved JSON report (perfsim run -o r.json, perfsim validate -o v.json) "
                     "or trace (--trace t.json) into DIR, each as SVG and PNG.",
          .hint_position = 6,
          .add_options = add_plot_options,
          .run = cmd_plot}),
      make_command(CommandSpec<SearchArgs>{
          .name = "search",
          .summary = "Rank every parallel layout of a scenario over N GPUs by predicted tokens/s within memory.",
          .hint_position = 3,
          .add_options = add_search_options,
          .run = cmd_search,
          .common = [](const SearchArgs& a) { return CommonArgs{.unsafe = a.unsafe, .run_timeout = a.run_timeout}; }}),
  };
}

std::unique_ptr<CLI::App> make_app(std::vector<Command>& commands) {
  auto app = std::make_unique<CLI::App>(
      "perfsim predicts what an ML workload costs on given hardware with a stack of "
      "optimizations,\nand measures the same operator graph with real kernels to check the "
      "prediction.");
  app->name("perfsim");
  app->set_version_flag("--version", fmt::format("perfsim {}", perfsim_version));
  app->require_subcommand(1);
  app->footer("Run 'perfsim COMMAND --help' for a command's options; docs/CLI.md explains every column.");
  for (Command& c : commands) {
    c.app = app->add_subcommand(c.name, c.summary);
    c.add_options(*c.app);
  }
  return app;
}

std::vector<std::string> hint_names(const std::vector<Command>& commands) {
  std::vector<const Command*> ordered;
  for (const Command& c : commands) ordered.push_back(&c);
  std::sort(ordered.begin(), ordered.end(),
            [](const Command* a, const Command* b) { return a->hint_position < b->hint_position; });
  std::vector<std::string> names;
  for (const Command* c : ordered) names.push_back(c->name);
  return names;
}

}  // namespace perfsim
