// `perfsim validate`: every scenario of the validation suite runs through run_scenario on one
// backend, priced with the device's profile; the report compares predictions and measurements
// (per-op, step time, speedups, peak memory) and --max-error turns it into a pass/fail check.
#include "cli/cmd_validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backends/registry.hpp"
#include "cli/charts.hpp"
#include "cli/data_paths.hpp"
#include "cli/device_profile.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/ranks.hpp"
#include "cli/script_options.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/report/trace.hpp"
#include "core/report/validation.hpp"
#include "core/run/runner.hpp"
#include "core/validate/collectives.hpp"
#include "core/validate/replay.hpp"
#include "core/validate/runs.hpp"
#include "core/validate/validation.hpp"

namespace perfsim {

std::vector<std::string> suite_files(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("{} directory '{}' not found (run from the perfsim source tree, or pass --suite DIR)",
                                  what, dir));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".lua" && e.is_regular_file(ec)) files.push_back(e.path().string());
  if (ec) throw ConfigError(fmt::format("cannot list '{}': {}", dir, ec.message()));
  if (files.empty()) throw ConfigError(fmt::format("{} '{}' holds no scenarios (*.lua files)", what, dir));
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

constexpr int exit_over_max_error = 1;

std::string max_error_check(const std::string& text) {
  try {
    (void)parse_max_error(text);
  } catch (const UsageError& e) {
    // CLI11 prefixes the option name itself.
    const std::string what = e.what();
    const std::string prefix = "--max-error ";
    return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
  }
  return {};
}

std::string describe(const CheckedFigure& f) {
  const std::string err =
      f.is_median() ? format_percent(f.error) : format_signed_percent(f.error);
  return fmt::format("{} {} {}", f.where, f.what, err);
}

}  // namespace

void add_validate_options(CLI::App& cmd, ValidateArgs& a) {
  cmd.add_option("--backend", a.backend,
                 "Where to measure: auto (CUDA when present, else CPU), "
                 "cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd.add_option("--profile", a.profile,
                 "Profile that prices the predictions: a name (profiles/NAME.lua), a file, or "
                 "'datasheet' for the device's catalog entry (default: a calibrated profile of "
                 "this device, else its catalog entry)")
      ->type_name("NAME|FILE");
  cmd.add_option("--max-error", a.max_error,
                 "Fail (exit 1) when a checked figure's |error| exceeds PCT percent: each step's "
                 "time and peak memory, each op class's median per-op error, each "
                 "optimization's speedup, each collective's median error (default: report only)")
      ->type_name("PCT")
      ->check(CLI::Validator(max_error_check, "", "max-error"));
  add_report_options(cmd, a.format, a.output);
  cmd.add_option("--trace", a.trace,
                 "Write every suite step's predicted and measured timelines to FILE as Chrome trace-event "
                 "JSON (ui.perfetto.dev, chrome://tracing)")
      ->type_name("FILE");
  cmd.add_option("--plots", a.plots,
                 "Also draw the report's charts into DIR as SVG and PNG: predicted vs measured per op "
                 "(as 'perfsim plot' does; needs python3-matplotlib)")
      ->type_name("DIR");
  cmd.add_flag("--published", a.published,
               "Predict the published-results suite (" + std::string(published_suite) +
                   " unless --suite is given): configurations from papers and vendor pages, each "
                   "compared with its published figure; executes nothing");
  cmd.add_flag("--quick", a.quick, "CPU-sized models: sets the option quick=true in every scenario of the suite");
  cmd.add_option("--suite", a.suite, "Directory of scenario files (*.lua), run in name order")
      ->type_name("DIR")
      ->capture_default_str();
  cmd.add_option("--module-path", a.module_path, "Directory searched first by require() and for profiles/NAME.lua")
      ->type_name("DIR");
  cmd.add_option("--measurements", a.measurements,
                 "Execute nothing: price the measurements saved in FILE (a report of perfsim validate "
                 "--format json) again, with --profile or the current cost model. Given more than once: "
                 "compare the runs, each run's figures and the ops over --op-error in every run")
      ->type_name("FILE");
  cmd.add_option("--op-error", a.op_error,
                 "With several --measurements: the per-op |error| that counts an op as over, in "
                 "percent (default 15)")
      ->type_name("PCT")
      ->check(CLI::Validator(max_error_check, "", "op-error"));
  cmd.add_flag("-q,--quiet", a.quiet, "No progress or status lines on stderr");
  cmd.add_option("--timeout", a.timeout, "Stop a scenario script still running after SECONDS (0: no limit)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(check_seconds, "", "timeout"))
      ->capture_default_str();
  cmd.add_option("--gpus", a.gpus,
                 "Run as N ranks on this node (mpirun -np N) and validate the multi-GPU suite (" +
                     std::string(ranks_suite) +
                     " unless --suite is given): each scenario's layout over N GPUs, errors per step, per op and per "
                     "collective (CPU ranks with --backend cpu)")
      ->type_name("N")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--rank-timeout", a.rank_timeout,
                 "Seconds a rank may spend executing one step before it ends every rank (0: no limit)")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--unsafe", a.unsafe,
               "Run the scenarios without the sandbox: they may read and write any file (trusted scripts only)");
  cmd.footer(
      "Exit status: 0 when every checked figure is within --max-error (or none is given), "
      "1 otherwise or on an error, 2 on a usage error. docs/VALIDATION.md defines every "
      "figure.");
}

double parse_max_error(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !std::isfinite(v) || v <= 0)
    throw UsageError(fmt::format("--max-error expects a percentage > 0 such as 10 or 7.5%, got "
                                 "'{}'",
                                 text));
  return v / 100.0;
}

namespace {

using Status = std::function<void(const std::string&)>;

Status status_printer(bool quiet) {
  return [quiet](const std::string& line) {
    if (quiet) return;
    fmt::print(stderr, "perfsim: validate: {}\n", line);
    std::fflush(stderr);
  };
}

// A saved report to price again, refused when the options do not fit it.
std::unique_ptr<ReplayBackend> load_measurements(const std::string& file, const ValidateArgs& a) {
  auto saved = std::make_unique<ReplayBackend>(ReplayBackend::from_file(file));
  if (a.quick && !saved->quick())
    throw UsageError(fmt::format("--quick: {} was measured at the suite's full sizes; drop --quick", file));
  if (a.profile == datasheet_profile && saved->device().catalog_name.empty())
    throw UsageError(fmt::format("--profile {}: {} does not name the device's catalog entry; pass a "
                                 "profile name or file",
                                 datasheet_profile, file));
  return saved;
}

DslSettings suite_settings(const ValidateArgs& a, bool quick) {
  DslSettings settings;
  settings.module_path = a.module_path;
  settings.default_backend = a.backend;
  settings.unsafe = a.unsafe;
  settings.timeout_s = a.timeout;
  settings.readable_paths.push_back(a.suite);
  if (quick) settings.overrides.emplace_back("quick", "true");
  return settings;
}

// Every scenario of the suite through run_scenario on `backend`, priced with `hw`; a replay
// backend serves each scenario's saved steps.
// `ranks`: this process is one rank of several, each scenario's layout executes across them.
std::vector<RunResult> run_suite(const std::vector<std::string>& files, const DslSettings& settings, Backend& backend,
                                 ReplayBackend* replay, const Hardware& hw, ProgressLine& line,
                                 Communicator* ranks = nullptr, double rank_timeout = 0) {
  std::vector<RunResult> results;
  const double file_share = 1.0 / static_cast<double>(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i];
    line.update(fmt::format("[{}/{}] {}", i + 1, files.size(), file), static_cast<double>(i) * file_share);
    const ScriptOutcome outcome = run_script(file, settings);
    std::vector<ScenarioPoint> points = outcome.points;
    if (points.empty()) {
      if (!outcome.scenario)
        throw ConfigError(fmt::format("{} declares no scenario; every file of a validation suite "
                                      "must return scenario{{...}}",
                                      file));
      points.push_back(ScenarioPoint{{}, *outcome.scenario});
    }
    const double point_share = file_share / static_cast<double>(points.size());
    for (std::size_t k = 0; k < points.size(); ++k) {
      const ScenarioPoint& point = points[k];
      const std::string label = fmt::format("[{}/{}] {}{}", i + 1, files.size(), file,
                                            point.values.empty()
                                                ? ""
                                                : " (" + sweep_label(point.values) + ")");
      const double begun = static_cast<double>(i) * file_share + static_cast<double>(k) * point_share;
      RunnerHooks hooks;
      hooks.ranks = ranks;
      hooks.rank_timeout_s = rank_timeout;
      if (line.enabled())
        hooks.progress = [&line, label, begun, point_share](std::size_t step, std::size_t steps,
                                                            const std::string& name) {
          line.update(fmt::format("{} · [{}/{}] {}", label, step + 1, steps, name),
                      begun + point_share * static_cast<double>(step) / static_cast<double>(steps));
        };
      if (replay != nullptr)
        replay->select(point.values.empty() ? point.scenario.name
                                            : point.scenario.name + "[" + sweep_label(point.values) + "]");
      RunResult r = run_scenario(point.scenario, &backend, &hw, hooks);
      if (r.sweep_point.empty()) r.sweep_point = point.values;
      if (r.file.empty()) r.file = file;
      results.push_back(std::move(r));
    }
  }
  line.clear();
  return results;
}

ValidationContext context_of(const ValidateArgs& a, const DeviceInfo& device, const std::string& backend,
                             const DeviceProfile& profile, const std::vector<std::string>& files, bool quick) {
  ValidationContext context;
  context.device = device.name;
  context.backend = backend;
  context.catalog = device.catalog_name;
  context.profile = profile.hardware.name;
  context.calibrated = profile.hardware.calibrated;
  context.measured_on = profile.hardware.calibration.measured_on;
  context.profile_source = profile.source;
  context.suite = a.suite;
  context.scenarios = files;
  context.quick = quick;
  return context;
}

void emit(const ValidateArgs& a, const std::string& text, ReportFormat format, const Status& status) {
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    write_file_atomically(a.output, text);
    status(fmt::format("wrote {} ({})", a.output, name_of(format)));
  }
}

// Several saved runs: each priced again with one profile (the first run's device picks it),
// then compared op by op.
int validate_runs(const ValidateArgs& a, ReportFormat format, const std::vector<std::string>& files) {
  if (!a.max_error.empty())
    throw UsageError("--max-error checks one run: give one --measurements file, or compare runs without it");
  if (format == ReportFormat::csv)
    throw UsageError("--format csv reports one run; comparing several --measurements takes table, md or json");
  const double op_error = a.op_error.empty() ? 0.15 : parse_max_error(a.op_error);
  std::vector<std::unique_ptr<ReplayBackend>> saved;
  for (const std::string& file : a.measurements) saved.push_back(load_measurements(file, a));
  const bool quick = saved.front()->quick();
  for (std::size_t r = 1; r < saved.size(); ++r)
    if (saved[r]->quick() != quick)
      throw UsageError(fmt::format("--measurements: {} and {} were measured at different sizes (one with "
                                   "--quick); compare runs of one kind",
                                   a.measurements.front(), a.measurements[r]));
  const DeviceProfile profile = resolve_device_profile(saved.front()->device(), a.profile, a.module_path);
  const Status status = status_printer(a.quiet);
  const DslSettings settings = suite_settings(a, quick);

  std::vector<ValidationSummary> runs;
  RunsContext ctx;
  ctx.base = context_of(a, saved.front()->device(), saved.front()->name(), profile, files, quick);
  for (std::size_t r = 0; r < saved.size(); ++r) {
    ProgressLine line(fmt::format("validate: run {} of {} ({})", r + 1, saved.size(), a.measurements[r]),
                      progress_enabled(a.quiet));
    runs.push_back(summarize_validation(run_suite(files, settings, *saved[r], saved[r].get(), profile.hardware,
                                                  line)));
    ctx.files.push_back(a.measurements[r]);
    ctx.devices.push_back(saved[r]->device().name);
  }
  const RunsComparison c = compare_runs(runs, op_error);
  emit(a, format_runs_comparison(runs, c, ctx, format), format, status);
  return 0;
}

}  // namespace

int cmd_validate(const ValidateArgs& given) {
  // One rank of several (mpirun, srun, --gpus): the multi-GPU suite unless --suite says
  // otherwise, its layouts sized to the ranks; rank 0 alone prints.
  Communicator* ranks = launched_ranks();
  ValidateArgs a = given;
  if (ranks != nullptr) {
    if (!a.measurements.empty())
      throw UsageError("--measurements prices saved runs in one process: drop --gpus (or the launcher)");
    if (a.suite == ValidateArgs{}.suite) a.suite = ranks_suite;
    if (ranks->rank() != 0) a.quiet = true;
  }
  const ReportFormat format = resolve_report_format(a.format, a.output);
  if (a.published) {
    if (ranks != nullptr) throw UsageError("--published executes nothing: drop --gpus (or the launcher)");
    if (!a.output.empty()) check_writable(a.output);
    // Its own suite unless --suite names one, found beside an installed binary too.
    a.suite = a.suite == ValidateArgs{}.suite ? find_data_path(published_suite) : a.suite;
    return validate_published(a, format);
  }
  // The shipped suites are found beside an installed binary too, from any directory.
  const bool default_suite = a.suite == ValidateArgs{}.suite;
  if (default_suite || a.suite == ranks_suite) a.suite = find_data_path(a.suite);
  if (!a.op_error.empty() && a.measurements.size() < 2)
    throw UsageError("--op-error counts ops across runs: give two or more --measurements files");
  std::optional<double> max_error;
  if (!a.max_error.empty()) max_error = parse_max_error(a.max_error);
  if (!a.output.empty()) check_writable(a.output);
  if (!a.trace.empty()) check_writable(a.trace);
  if (!a.plots.empty()) {
    if (a.measurements.size() > 1)
      throw UsageError("--plots charts one run: give one --measurements file, or compare runs without it");
    if (ranks == nullptr || ranks->rank() == 0) {
      check_chart_dir(a.plots);
      check_chart_tools();
    }
  }
  const std::vector<std::string> files = suite_files(a.suite, "validation suite");
  if (a.measurements.size() > 1) return validate_runs(a, format, files);

  // Backend and profile first: an unknown profile fails before anything runs. Saved
  // measurements stand in for a backend, with the sizes (quick or not) they were taken at.
  std::unique_ptr<Backend> backend;
  ReplayBackend* replay = nullptr;
  bool quick = a.quick;
  if (!a.measurements.empty()) {
    std::unique_ptr<ReplayBackend> saved = load_measurements(a.measurements.front(), a);
    quick = saved->quick();
    replay = saved.get();
    backend = std::move(saved);
  } else {
    backend = make_backend(a.backend);
    backend->join_ranks(ranks);
  }
  const DeviceInfo device = backend->device();
  const DeviceProfile profile = resolve_device_profile(device, a.profile, a.module_path);
  const Status status = status_printer(a.quiet);

  if (replay == nullptr && backend->name() == "cpu" && !a.quick && default_suite)
    status("the suite's full sizes are meant for a GPU and take long on a CPU; --quick runs "
           "CPU-sized models");

  DslSettings settings = suite_settings(a, quick);
  if (ranks != nullptr) settings.overrides.emplace_back("gpus", std::to_string(ranks->size()));
  ProgressLine line("validate", progress_enabled(a.quiet));
  const std::vector<RunResult> results =
      run_suite(files, settings, *backend, replay, profile.hardware, line, ranks, a.rank_timeout);
  if (ranks != nullptr && ranks->rank() != 0) return 0;
  if (!a.trace.empty()) {
    write_file_atomically(a.trace, format_trace(results));
    status(fmt::format("wrote {} (trace)", a.trace));
  }
  ValidationSummary summary = summarize_validation(results);
  if (ranks != nullptr) {
    // Each rank's GPU is one of the group: the collectives are those the steps ran.
    add_step_collective_errors(summary, results);
  } else {
    const CollectiveMeasurements collectives =
        replay != nullptr ? replay->collectives()
                          : measure_collectives(*backend, [&line](const std::string& what) { line.update(what, 0); });
    line.clear();
    add_collective_errors(summary, collectives, profile.hardware);
  }
  ValidationContext context = context_of(a, device, backend->name(), profile, files, quick);
  if (!a.measurements.empty()) context.measurements = a.measurements.front();
  context.max_error = max_error;
  emit(a, format_validation(summary, context, format), format, status);
  if (!a.plots.empty()) {
    ChartOptions charts;
    charts.quiet = a.quiet;
    charts.trace = a.trace;  // written above: the timeline chart is drawn from it
    if (!draw_charts_of(format_validation(summary, context, ReportFormat::json), a.plots, charts)) return 1;
  }

  if (!max_error) return 0;
  const std::vector<CheckedFigure> over = figures_over(summary, *max_error);
  if (over.empty()) {
    status(fmt::format("all {} checked figures within --max-error {}",
                       checked_figures(summary).size(), format_percent(*max_error)));
    return 0;
  }
  // Printed even with -q: it is the outcome, not progress.
  fmt::print(stderr, "perfsim: validate: {} figure{} over --max-error {}: worst: {}\n",
             over.size(), over.size() == 1 ? "" : "s", format_percent(*max_error),
             describe(over.front()));
  return exit_over_max_error;
}

}  // namespace perfsim
