// `perfsim run SCENARIO`: load the script, run every sweep point through run_scenario on the
// chosen backend, and print (or write) the report. A plain script just runs.
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "backends/registry.hpp"
#include "cli/charts.hpp"
#include "cli/device_profile.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/ranks.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/report/report.hpp"
#include "core/report/sections.hpp"
#include "core/report/trace.hpp"
#include "core/run/runner.hpp"
#include "dsl/dsl.hpp"

namespace perfsim {

namespace {

// The backend and its hardware profile, created on first use so a predict-only scenario
// never needs one.
struct ExecutionTarget {
  std::unique_ptr<Backend> backend;
  std::optional<Hardware> hardware;
};

// The profile that prices the executing device: --profile, else a calibrated profile of this
// device listed in the scenario's hardware, else resolve_device_profile's search.
Hardware device_hardware(const DeviceInfo& device, const RunArgs& a, const Scenario& s) {
  if (a.profile.empty())
    for (const Hardware& h : s.hardware)
      if (h.calibrated && h.calibration.measured_on.device == device.name) return h;
  return resolve_device_profile(device, a.profile, a.module_path).hardware;
}

void write_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int cmd_run(const RunArgs& a) {
  const ReportFormat format = resolve_report_format(a.format, a.output);
  if (!a.output.empty()) check_writable(a.output);
  if (!a.trace.empty()) check_writable(a.trace);
  // Only the rank that reports draws; the others need no python.
  if (!a.plots.empty() && (launched_ranks() == nullptr || launched_ranks()->rank() == 0)) {
    check_chart_dir(a.plots);
    check_chart_tools();
  }

  const ScriptOutcome outcome = run_script(a.scenario, make_dsl_settings(a));
  std::vector<ScenarioPoint> points = outcome.points;
  if (points.empty()) {
    if (!outcome.scenario) {  // a plain script: its prints are the output
      if (!a.output.empty() && !a.quiet)
        fmt::print(stderr, "perfsim: {} is a plain script (no scenario): nothing written to {}\n",
                   a.scenario, a.output);
      if (!a.plots.empty() && !a.quiet)
        fmt::print(stderr, "perfsim: {} is a plain script (no scenario): no charts drawn in {}\n", a.scenario,
                   a.plots);
      return 0;
    }
    points.push_back(ScenarioPoint{{}, *outcome.scenario});
  }

  ExecutionTarget target;
  // One rank of several (mpirun, srun, --gpus): rank 0 alone shows progress and the report.
  Communicator* ranks = launched_ranks();
  const bool root = ranks == nullptr || ranks->rank() == 0;
  ProgressLine line("run", root && progress_enabled(a.quiet));
  std::vector<RunResult> results;
  results.reserve(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    ScenarioPoint& point = points[i];
    Backend* backend = nullptr;
    const Hardware* device_hw = nullptr;
    if (a.backend != "none" && point.scenario.execute.enabled) {
      if (!target.backend) {
        target.backend = make_backend(a.backend);
        target.backend->join_ranks(ranks);
        target.hardware = device_hardware(target.backend->device(), a, point.scenario);
      }
      backend = target.backend.get();
      device_hw = &*target.hardware;
    } else if (!a.profile.empty()) {
      point.scenario.hardware.insert(point.scenario.hardware.begin(),
                                     load_profile(a.profile, a.module_path));
    }
    RunnerHooks hooks;
    hooks.ranks = ranks;
    hooks.rank_timeout_s = a.rank_timeout;
    if (line.enabled()) {
      std::string prefix;
      if (points.size() > 1)
        prefix = fmt::format("[{}/{} {}] · ", i + 1, points.size(), sweep_label(point.values));
      const double point_share = 1.0 / static_cast<double>(points.size());
      hooks.progress = [&line, prefix, i, point_share](std::size_t step, std::size_t steps, const std::string& name) {
        const double fraction = (static_cast<double>(i) + static_cast<double>(step) / static_cast<double>(steps)) *
                                point_share;
        line.update(fmt::format("{}[{}/{}] {}", prefix, step + 1, steps, name), fraction);
      };
    }
    RunResult r = run_scenario(point.scenario, backend, device_hw, hooks);
    if (r.sweep_point.empty()) r.sweep_point = point.values;
    if (r.model_params == 0) r.model_params = point.scenario.model.params();
    if (r.file.empty()) r.file = point.scenario.file;
    r.unsafe = a.unsafe;
    results.push_back(std::move(r));
  }
  line.clear();  // before the report

  if (!root) return 0;
  if (!a.trace.empty()) {
    write_file_atomically(a.trace, format_trace(results));
    if (!a.quiet) fmt::print(stderr, "perfsim: wrote {} (trace)\n", a.trace);
  }
  const std::string text = format_report(results, format);
  if (a.output.empty()) {
    write_stdout(text);
  } else {
    write_file_atomically(a.output, text);
    if (!a.quiet) fmt::print(stderr, "perfsim: wrote {} ({})\n", a.output, name_of(format));
  }
  if (!a.plots.empty()) {
    ChartOptions charts;
    charts.quiet = a.quiet;
    if (!draw_charts_of(format_report(results, ReportFormat::json), a.plots, charts)) return 1;
  }
  return 0;
}

}  // namespace perfsim
