// The perfsim command line: CLI11 setup for run, list, explain, search, calibrate, validate and plot,
// dispatch, and the single place where exceptions become "perfsim: error: ..." and an exit
// code (1 failure, 2 usage).
#include "cli/commands.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cmd_calibrate.hpp"
#include "cli/cmd_plot.hpp"
#include "backends/mpi/mpi_world.hpp"
#include "cli/cmd_validate.hpp"
#include "cli/ranks.hpp"
#include "cli/subcommands.hpp"
#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"
#include "core/text.hpp"
#include "core/version.hpp"
#include "dsl/dsl.hpp"

namespace perfsim {

namespace {

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

void print_error(const std::string& message) {
  fmt::print(stderr, "perfsim: error: {}\n", message);
  std::fflush(stderr);
}

// --set NAME=VALUE: reject a value without '=' while parsing, so it is a usage error.
std::string check_set(const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return "expects NAME=VALUE, got '" + kv + "'";
  return {};
}

// --timeout SECONDS: a number >= 0.
std::string check_timeout(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0 && v <= 1e9) return {};
  } catch (const std::exception&) {
  }
  return "expects seconds >= 0 (0: no limit), got '" + text + "'";
}

// --unsafe, --timeout and --output-dir: the sandbox and limits of the script (docs/DSL.md).
void add_sandbox_options(CLI::App* cmd, ScriptArgs& a) {
  cmd->add_option("--output-dir", a.output_dir,
                  "Directory where the script's perfsim.write(name, text) puts its files")
      ->type_name("DIR");
  cmd->add_option("--timeout", a.timeout, "Stop a script still running after SECONDS (0: no limit)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(check_timeout, "", "timeout"))
      ->capture_default_str();
  cmd->add_option("--run-timeout", a.run_timeout,
                  "Stop the whole command after SECONDS: script, predictions, executed runs, writing "
                  "(0: no limit)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(check_timeout, "", "run-timeout"))
      ->capture_default_str();
  cmd->add_flag("--unsafe", a.unsafe,
                "Run the script without the sandbox: it may read and write any file (trusted scripts only)");
}

void add_script_options(CLI::App* cmd, ScriptArgs& a, const std::string& backend_help) {
  cmd->add_option("--set", a.sets, "Override a script option: --set NAME=VALUE (repeatable)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_set, "", "set"));
  cmd->add_option("--module-path", a.module_path,
                  "Directory searched first by require() (before $PERFSIM_PATH and the stdlib)")
      ->type_name("DIR");
  cmd->add_option("--backend", a.backend, backend_help)
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "none"}))
      ->capture_default_str();
  cmd->add_option("--profile", a.profile,
                  "Hardware profile that prices the executing device (without a backend: the "
                  "scenario's first hardware): a name (profiles/NAME.lua, see 'perfsim list "
                  "profiles'), a file written by 'perfsim calibrate', or 'datasheet' (default: "
                  "a calibrated profile of this device, else its catalog entry)")
      ->type_name("NAME|FILE");
  add_sandbox_options(cmd, a);
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

}  // namespace

int run_cli(int argc, char** argv) {
  // An interrupted write leaves no temporary file behind (core/files.hpp).
  remove_temporary_files_on_signals();
  CLI::App app{
      "perfsim predicts what an ML workload costs on given hardware with a stack of "
      "optimizations,\nand measures the same operator graph with real kernels to check the "
      "prediction."};
  app.name("perfsim");
  app.set_version_flag("--version", fmt::format("perfsim {}", perfsim_version));
  app.require_subcommand(1);
  app.footer("Run 'perfsim COMMAND --help' for a command's options; docs/CLI.md explains every "
             "column.");

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Predict and measure a Lua scenario, step by step through its optimization stack.");
  run_cmd->add_option("scenario", run.scenario, "Lua scenario or plain script")
      ->required()
      ->type_name("SCENARIO");
  add_script_options(run_cmd, run,
                     "Where to execute: auto (CUDA when present, else CPU), cpu, cuda, or none "
                     "(prediction only)");
  run_cmd->add_option("--format", run.format, "Report format (default: from -o's extension, else table)")
      ->check(CLI::IsMember({"table", "md", "markdown", "json", "csv"}));
  run_cmd->add_option("-o,--output", run.output, "Write the report to FILE (whole or not at all)")
      ->type_name("FILE");
  run_cmd->add_option("--trace", run.trace,
                      "Write each step's predicted and measured timelines to FILE as Chrome trace-event JSON "
                      "(open it in ui.perfetto.dev or chrome://tracing)")
      ->type_name("FILE");
  run_cmd->add_option("--vllm-json", run.vllm_json,
                      "Serving scenarios: write each sweep point's and stack step's predicted run into DIR as the "
                      "JSON 'vllm bench serve --save-result' writes, one file each")
      ->type_name("DIR");
  run_cmd->add_option("--plots", run.plots,
                      "Also draw the report's charts into DIR as SVG and PNG (as 'perfsim plot' does; needs "
                      "python3-matplotlib)")
      ->type_name("DIR");
  run_cmd->add_flag("-q,--quiet", run.quiet, "No progress or status lines on stderr");
  run_cmd->add_option("--gpus", run.gpus,
                      "Run as N ranks on this node (mpirun -np N): a parallel layout of N GPUs executes "
                      "across them, rank 0 reports (CPU ranks with --backend cpu)")
      ->type_name("N")
      ->check(CLI::Range(1, 1024));
  run_cmd->add_option("--rank-timeout", run.rank_timeout,
                      "Seconds a rank may spend executing one step before it ends every rank (a lost peer "
                      "must not hang the run; 0: no limit)")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  run_cmd->footer("'perfsim run SCENARIO --help' also lists the options the script declares.");

  ListArgs list;
  CLI::App* list_cmd = app.add_subcommand(
      "list", "List the hardware catalog, the model zoo, the optimizations or the calibrated profiles.");
  list_cmd->add_option("category", list.category, "hardware, models, optimizations or profiles")
      ->required()
      ->type_name("CATEGORY");
  list_cmd->add_option("--module-path", list.module_path,
                       "Directory searched first for stdlib modules (custom catalogs)")
      ->type_name("DIR");

  ExplainArgs explain;
  explain.backend = "none";
  CLI::App* explain_cmd = app.add_subcommand(
      "explain",
      "Show one optimization step's roofline op by op: FLOPs, bytes, bound, time.");
  explain_cmd->add_option("scenario", explain.scenario, "Lua scenario")
      ->required()
      ->type_name("SCENARIO");
  explain_cmd->add_option("--step", explain.step, "Stack step to explain (default: the last)")
      ->type_name("NAME");
  explain_cmd->add_option("--hardware", explain.hardware,
                          "Catalog hardware to price on (default: the backend's device, else the "
                          "scenario's first hardware)")
      ->type_name("NAME");
  explain_cmd->add_option("--stage", explain.stage,
                          "Pipeline stage whose rank to show, with its collectives (parallel layouts; "
                          "default 0)")
      ->type_name("N");
  add_script_options(explain_cmd, explain,
                     "With a backend, price on its device's profile (nothing is executed)");
  explain_cmd->footer(
      "'perfsim explain SCENARIO --help' also lists the options the script declares.");

  CalibrateArgs calibrate;
  CLI::App* calibrate_cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine with microbenchmarks and write a calibrated hardware profile (Lua).");
  calibrate_cmd->add_option("--backend", calibrate.backend,
                            "Device to measure: auto (CUDA when present, else CPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  calibrate_cmd->add_flag("--quick", calibrate.quick, "Coarser sweeps (under a minute on an H100)");
  calibrate_cmd->add_option("-o,--output", calibrate.output, "Write the profile to FILE (whole or not at all)")
      ->required()
      ->type_name("FILE");
  calibrate_cmd->add_option("--points", calibrate.points,
                            "Also write every timed op behind the fit (shape, curve key, roofline and measured "
                            "seconds, efficiency) to FILE as CSV")
      ->type_name("FILE");
  calibrate_cmd->add_option("--name", calibrate.name,
                            "Profile name (default: the device's catalog entry + \"-local\", lowercased)")
      ->type_name("NAME");
  calibrate_cmd->add_option("--module-path", calibrate.module_path,
                            "Directory searched first for the hardware catalog")
      ->type_name("DIR");
  calibrate_cmd->add_option("--merge", calibrate.merge,
                            "Measure nothing: fit the curves and GEMM tables of the --profile again from the points "
                            "of one or more calibrations (files written by --points; repeat the option or list "
                            "several), pooled")
      ->type_name("FILE")
      ->expected(1, -1);
  calibrate_cmd->add_option("--profile", calibrate.profile,
                            "With --merge: the profile whose other figures (launch, host dispatch, links) the "
                            "result keeps, a name in 'profiles' or a file written by 'perfsim calibrate'")
      ->type_name("NAME|FILE");
  calibrate_cmd->add_flag("-q,--quiet", calibrate.quiet, "No progress or status lines on stderr");
  calibrate_cmd->footer("docs/CALIBRATION.md describes the sweeps, the fit and --merge.");

  ValidateArgs validate;
  CLI::App* validate_cmd = add_validate_command(app, validate);

  PlotArgs plot;
  CLI::App* plot_cmd = add_plot_command(app, plot);

  SearchArgs search;
  search.backend = "none";
  CLI::App* search_cmd = app.add_subcommand(
      "search",
      "Rank every parallel layout of a scenario over N GPUs by predicted tokens/s within memory.");
  search_cmd->add_option("scenario", search.scenario, "Lua scenario (its last stack step is searched)")
      ->required()
      ->type_name("SCENARIO");
  search_cmd->add_option("--gpus", search.gpus,
                         "GPUs every layout spans, dp · tp · pp · cp (default: the scenario's layout)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20));
  search_cmd->add_option("--top", search.top, "Layouts shown in the table (JSON and CSV carry every one)")
      ->type_name("N")
      ->capture_default_str();
  search_cmd->add_option("--hardware", search.hardware,
                         "Catalog hardware to price on (default: the scenario's first hardware)")
      ->type_name("NAME");
  search_cmd->add_option("--profile", search.profile,
                         "Price on a profile instead: a name in 'perfsim list profiles' or a file written by "
                         "'perfsim calibrate'")
      ->type_name("NAME|FILE");
  search_cmd->add_option("--global-batch", search.global_batch,
                         "Sequences per optimizer step, kept for every layout (default: the scenario's batch · "
                         "grad_accum · dp)")
      ->type_name("N");
  search_cmd->add_option("--micro-batch", search.micro_batch,
                         "Micro-batch sizes to try (default: 1,2,4,8 and the scenario's batch)")
      ->type_name("LIST")
      ->delimiter(',');
  search_cmd->add_option("--tp", search.tp,
                         "Tensor-parallel degrees to try (default: powers of two up to the GPUs of a node)")
      ->type_name("LIST")
      ->delimiter(',');
  search_cmd->add_option("--pp", search.pp, "Pipeline degrees to try (default: divisors of --gpus up to the layers)")
      ->type_name("LIST")
      ->delimiter(',');
  search_cmd->add_option("--zero", search.zero, "ZeRO stages to try (default: 0,1,2,3; 3 is FSDP's full_shard)")
      ->type_name("LIST")
      ->delimiter(',');
  search_cmd->add_option("--interleave", search.interleave,
                         "Model chunks per pipeline stage to try (default: 1,2,4)")
      ->type_name("LIST")
      ->delimiter(',');
  search_cmd->add_option("--ep", search.ep,
                         "Expert-parallel degrees to try, each dividing dp (default: a mixture-of-experts model's "
                         "powers of two up to its experts; 1 otherwise)")
      ->type_name("LIST")
      ->delimiter(',');
  search_cmd->add_flag("--recompute", search.recompute,
                       "Also try every layout with full activation recompute (the stack's own recompute is "
                       "searched, not assumed)");
  search_cmd->add_flag("--cp", search.cp,
                       "Also try context parallelism (powers of two up to 16 that split the sequence in 2·cp)");
  search_cmd->add_flag("--uneven-pp", search.uneven_pp,
                       "Keep pipelines whose stages hold unequal layer counts (pruned by default)");
  search_cmd->add_option("--format", search.format, "Output format (default: from -o's extension, else table)")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  search_cmd->add_option("-o,--output", search.output,
                         "Write the result to FILE (whole or not at all); JSON and CSV list every priced layout")
      ->type_name("FILE");
  search_cmd->add_option("--threads", search.threads, "Worker threads (default: the machine's cores)")
      ->type_name("N")
      ->check(CLI::Range(1, 4096));
  search_cmd->add_flag("-q,--quiet", search.quiet, "No progress line on stderr");
  search_cmd->add_option("--set", search.sets, "Override a script option: --set NAME=VALUE (repeatable)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_set, "", "set"));
  search_cmd->add_option("--module-path", search.module_path,
                         "Directory searched first by require() (before $PERFSIM_PATH and the stdlib)")
      ->type_name("DIR");
  add_sandbox_options(search_cmd, search);
  search_cmd->footer(
      "Prediction only: each layout's ranks are built with one transformer layer and priced; docs/CLI.md "
      "(perfsim search) states the space, the pruning and the limiter.");

  // CLI11 reports a missing or misspelt command as "A subcommand is required"; say which.
  const std::vector<std::string> commands = {"run", "list", "explain", "search", "calibrate", "validate", "plot"};
  const std::string usage_hint = "Run 'perfsim --help' (or 'perfsim COMMAND --help') for usage.\n";
  if (argc < 2) {
    print_error("no command given; choose run, list, explain, search, calibrate, validate or plot");
    std::fputs(usage_hint.c_str(), stderr);
    return exit_usage;
  }
  if (const std::string first = argv[1]; !first.empty() && first.front() != '-' &&
                                         std::find(commands.begin(), commands.end(), first) ==
                                             commands.end()) {
    print_error(fmt::format("unknown command '{}'{}; choose run, list, explain, search, calibrate, validate or plot",
                            first, did_you_mean(first, commands)));
    std::fputs(usage_hint.c_str(), stderr);
    return exit_usage;
  }
  if (const std::string first = argv[1]; first.size() > 1 && first.front() == '-') {
    const std::vector<std::string> flags = {"--help", "-h", "--help-all", "--version"};
    if (std::find(flags.begin(), flags.end(), first) == flags.end()) {
      const std::string hint = did_you_mean(first, flags);
      print_error(fmt::format("unknown option '{}'{}", first,
                              hint.empty() ? "; a command's options go after it: perfsim run "
                                             "SCENARIO --backend none"
                                           : hint));
      std::fputs(usage_hint.c_str(), stderr);
      return exit_usage;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    // `run SCRIPT --help` and `explain SCRIPT --help` also list the script's options.
    const ScriptArgs* script = run_cmd->parsed()       ? static_cast<const ScriptArgs*>(&run)
                               : explain_cmd->parsed() ? &explain
                                                       : nullptr;
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
    const CLI::App* cmd = run_cmd->parsed() ? run_cmd : explain_cmd->parsed() ? explain_cmd
                        : list_cmd->parsed() ? list_cmd
                        : calibrate_cmd->parsed() ? calibrate_cmd
                        : validate_cmd->parsed() ? validate_cmd
                        : plot_cmd->parsed() ? plot_cmd
                        : search_cmd->parsed() ? search_cmd : nullptr;
    const std::string unknown = cmd != nullptr ? unknown_option(*cmd, argc, argv) : "";
    if (unknown.empty())
      print_error(e.what());
    else
      print_error(fmt::format("unknown option '{}' for perfsim {}{}", unknown, cmd->get_name(),
                              did_you_mean(unknown, option_names(*cmd))));
    std::fputs(usage_hint.c_str(), stderr);
    return exit_usage;
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    std::fputs(usage_hint.c_str(), stderr);
    return exit_usage;
  }

  const bool unsafe = (run_cmd->parsed() && run.unsafe) || (explain_cmd->parsed() && explain.unsafe) ||
                      (search_cmd->parsed() && search.unsafe) || (validate_cmd->parsed() && validate.unsafe);
  if (unsafe) {
    fmt::print(stderr, "perfsim: warning: unsafe: scripts run without the sandbox (--unsafe)\n");
    std::fflush(stderr);
  }
  // --run-timeout: the loops that run long stop at their next check; work that reaches no check
  // (a kernel, a library call) ends the process 10 s later, its temporary files removed.
  const ScriptArgs* limited = run_cmd->parsed()      ? static_cast<const ScriptArgs*>(&run)
                              : explain_cmd->parsed() ? static_cast<const ScriptArgs*>(&explain)
                              : search_cmd->parsed()  ? static_cast<const ScriptArgs*>(&search)
                                                      : nullptr;
  const double run_timeout = limited != nullptr ? limited->run_timeout : 0;
  const std::string run_limit_text = fmt::format("the command ran longer than --run-timeout {} s", run_timeout);
  HardStop run_hard_stop;
  run_hard_stop.grace_s = 10;
  run_hard_stop.message = [run_limit_text] { return run_limit_text + " and did not stop at a check; stopped the process"; };
  const DeadlineScope run_limit(run_timeout, run_limit_text + " (raise --run-timeout or ask for less work)",
                                std::move(run_hard_stop));
  try {
    const int gpus = run_cmd->parsed() ? run.gpus : validate_cmd->parsed() ? validate.gpus : 0;
    if (gpus > 1 && launcher_world_size() == 1) return relaunch_on_ranks(gpus, argc, argv);
    if (Communicator* ranks = launched_ranks(); ranks != nullptr) {
      if (!run_cmd->parsed() && !validate_cmd->parsed())
        throw UsageError("only `perfsim run` and `perfsim validate` run as several ranks (mpirun, srun, --gpus)");
      if (gpus > 1 && gpus != ranks->size())
        throw UsageError(fmt::format("--gpus {} under a launcher of {} ranks: drop --gpus", gpus, ranks->size()));
      try {
        return run_cmd->parsed() ? cmd_run(run) : cmd_validate(validate);
      } catch (const std::exception& e) {
        abort_ranks(*ranks, e.what(), exit_failure);
      }
    }
    if (run_cmd->parsed()) return cmd_run(run);
    if (list_cmd->parsed()) return cmd_list(list);
    if (explain_cmd->parsed()) return cmd_explain(explain);
    if (search_cmd->parsed()) return cmd_search(search);
    if (calibrate_cmd->parsed()) return cmd_calibrate(calibrate);
    if (validate_cmd->parsed()) return cmd_validate(validate);
    if (plot_cmd->parsed()) return cmd_plot(plot);
    print_error("no command given");
    return exit_usage;
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
