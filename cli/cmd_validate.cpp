// `perfsim validate`: every scenario of the validation suite runs through run_scenario on one
// backend, priced with the device's profile; the report compares predictions and measurements
// (per-op, step time, speedups, peak memory) and --max-error turns it into a pass/fail check.
#include "cli/cmd_validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backends/registry.hpp"
#include "cli/device_profile.hpp"
#include "cli/output_file.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/report_validation.hpp"
#include "core/runner.hpp"
#include "core/validation.hpp"
#include "core/validation_collectives.hpp"
#include "core/validation_replay.hpp"

namespace perfsim {

namespace {

constexpr int exit_over_max_error = 1;

// The suite's scenario files: *.lua directly in `dir`, sorted by name.
std::vector<std::string> suite_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("validation suite directory '{}' not found (run from the perfsim "
                                  "source tree, or pass --suite DIR)",
                                  dir));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".lua" && e.is_regular_file(ec)) files.push_back(e.path().string());
  if (ec) throw ConfigError(fmt::format("cannot list '{}': {}", dir, ec.message()));
  if (files.empty())
    throw ConfigError(fmt::format("validation suite '{}' holds no scenarios (*.lua files)", dir));
  std::sort(files.begin(), files.end());
  return files;
}

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

CLI::App* add_validate_command(CLI::App& app, ValidateArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Run the validation suite on a backend and report prediction errors (per op, step time, "
      "speedups, memory; collectives when the backend spans 2 or more GPUs).");
  cmd->add_option("--backend", a.backend, "Where to measure: auto (CUDA when present, else CPU), "
                                          "cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--profile", a.profile,
                  "Profile that prices the predictions: a name (profiles/NAME.lua), a file, or "
                  "'datasheet' for the device's catalog entry (default: a calibrated profile of "
                  "this device, else its catalog entry)")
      ->type_name("NAME|FILE");
  cmd->add_option("--max-error", a.max_error,
                  "Fail (exit 1) when a checked figure's |error| exceeds PCT percent: each step's "
                  "time and peak memory, each op class's median per-op error, each "
                  "optimization's speedup, each collective's median error (default: report only)")
      ->type_name("PCT")
      ->check(CLI::Validator(max_error_check, "", "max-error"));
  cmd->add_option("--format", a.format, "Report format (default: from -o's extension, else table)")
      ->check(CLI::IsMember({"table", "md", "markdown", "json", "csv"}));
  cmd->add_option("-o,--output", a.output, "Write the report to FILE (whole or not at all)")
      ->type_name("FILE");
  cmd->add_flag("--quick", a.quick,
                "CPU-sized models: sets the option quick=true in every scenario of the suite");
  cmd->add_option("--suite", a.suite, "Directory of scenario files (*.lua), run in name order")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->add_option("--module-path", a.module_path,
                  "Directory searched first by require() and for profiles/NAME.lua")
      ->type_name("DIR");
  cmd->add_option("--measurements", a.measurements,
                  "Execute nothing: price the measurements saved in FILE (a report of perfsim validate "
                  "--format json) again, with --profile or the current cost model")
      ->type_name("FILE");
  cmd->add_flag("-q,--quiet", a.quiet, "No progress or status lines on stderr");
  cmd->footer("Exit status: 0 when every checked figure is within --max-error (or none is given), "
              "1 otherwise or on an error, 2 on a usage error. docs/VALIDATION.md defines every "
              "figure.");
  return cmd;
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

int cmd_validate(const ValidateArgs& a) {
  const ReportFormat format = resolve_report_format(a.format, a.output);
  std::optional<double> max_error;
  if (!a.max_error.empty()) max_error = parse_max_error(a.max_error);
  if (!a.output.empty()) check_writable(a.output);
  const std::vector<std::string> files = suite_files(a.suite);

  // Backend and profile first: an unknown profile fails before anything runs. Saved
  // measurements stand in for a backend, with the sizes (quick or not) they were taken at.
  std::unique_ptr<Backend> backend;
  ReplayBackend* replay = nullptr;
  bool quick = a.quick;
  if (!a.measurements.empty()) {
    auto saved = std::make_unique<ReplayBackend>(ReplayBackend::from_file(a.measurements));
    if (a.quick && !saved->quick())
      throw UsageError(fmt::format("--quick: {} was measured at the suite's full sizes; drop --quick",
                                   a.measurements));
    if (a.profile == datasheet_profile && saved->device().catalog_name.empty())
      throw UsageError(fmt::format("--profile {}: {} does not name the device's catalog entry; pass a "
                                   "profile name or file",
                                   datasheet_profile, a.measurements));
    quick = saved->quick();
    replay = saved.get();
    backend = std::move(saved);
  } else {
    backend = make_backend(a.backend);
  }
  const DeviceInfo device = backend->device();
  const DeviceProfile profile = resolve_device_profile(device, a.profile, a.module_path);

  DslSettings settings;
  settings.module_path = a.module_path;
  settings.default_backend = a.backend;
  if (quick) settings.overrides.emplace_back("quick", "true");

  auto status = [&](const std::string& line) {
    if (a.quiet) return;
    fmt::print(stderr, "perfsim: validate: {}\n", line);
    std::fflush(stderr);
  };

  if (replay == nullptr && backend->name() == "cpu" && !a.quick && a.suite == ValidateArgs{}.suite)
    status("the suite's full sizes are meant for a GPU and take long on a CPU; --quick runs "
           "CPU-sized models");

  std::vector<RunResult> results;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i];
    const ScriptOutcome outcome = run_script(file, settings);
    std::vector<ScenarioPoint> points = outcome.points;
    if (points.empty()) {
      if (!outcome.scenario)
        throw ConfigError(fmt::format("{} declares no scenario; every file of a validation suite "
                                      "must return scenario{{...}}",
                                      file));
      points.push_back(ScenarioPoint{{}, *outcome.scenario});
    }
    for (const ScenarioPoint& point : points) {
      const std::string label = fmt::format("[{}/{}] {}{}", i + 1, files.size(), file,
                                            point.values.empty()
                                                ? ""
                                                : " (" + sweep_label(point.values) + ")");
      status(label);
      RunnerHooks hooks;
      if (!a.quiet)
        hooks.progress = [&status, label](const std::string& msg) { status(label + " " + msg); };
      if (replay != nullptr)
        replay->select(point.values.empty() ? point.scenario.name
                                            : point.scenario.name + "[" + sweep_label(point.values) + "]");
      RunResult r = run_scenario(point.scenario, backend.get(), &profile.hardware, hooks);
      if (r.sweep_point.empty()) r.sweep_point = point.values;
      if (r.file.empty()) r.file = file;
      results.push_back(std::move(r));
    }
  }

  ValidationSummary summary = summarize_validation(results);
  const CollectiveMeasurements collectives =
      replay != nullptr ? replay->collectives() : measure_collectives(*backend, status);
  add_collective_errors(summary, collectives, profile.hardware);
  ValidationContext context;
  context.device = device.name;
  context.backend = backend->name();
  context.catalog = device.catalog_name;
  context.measurements = a.measurements;
  context.profile = profile.hardware.name;
  context.calibrated = profile.hardware.calibrated;
  context.measured_on = profile.hardware.calibration.measured_on;
  context.profile_source = profile.source;
  context.suite = a.suite;
  context.scenarios = files;
  context.quick = quick;
  context.max_error = max_error;

  const std::string text = format_validation(summary, context, format);
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else {
    write_file_atomically(a.output, text);
    status(fmt::format("wrote {} ({})", a.output, name_of(format)));
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
