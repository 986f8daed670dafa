// `perfsim run SCENARIO`: load the script, run every sweep point through run_scenario on the
// chosen backend, and print (or write) the report. A plain script just runs.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backends/registry.hpp"
#include "cli/charts.hpp"
#include "cli/data_paths.hpp"
#include "cli/device_profile.hpp"
#include "cli/host_load.hpp"
#include "cli/host_profile_cache.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/ranks.hpp"
#include "cli/script_options.hpp"
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
// device listed in the scenario's hardware, else resolve_device_profile's search, else (a CPU
// that has none) the first-use calibration of this CPU, cached (cli/host_profile_cache.hpp).
// `busy`: other work kept the machine busy just before (a calibration then is not kept).
Hardware device_hardware(Backend& backend, const RunArgs& a, const Scenario& s, bool busy) {
  const DeviceInfo device = backend.device();
  if (a.profile.empty())
    for (const Hardware& h : s.hardware)
      if (h.calibrated && h.calibration.measured_on.device == device.name) return h;
  DeviceProfile found = resolve_device_profile(device, a.profile, a.module_path);
  // Ranks of one run would calibrate side by side on the same cores: they keep the estimate.
  if (a.profile.empty() && !found.hardware.calibrated && backend.name() == "cpu" && !a.no_cache &&
      launched_ranks() == nullptr) {
    HostProfileOptions o;
    o.quiet = a.quiet;
    o.module_path = a.module_path;
    o.busy = busy;
    if (std::optional<Hardware> hw = cached_host_profile(backend, o)) return std::move(*hw);
  }
  return std::move(found.hardware);
}

// A serving scenario runs its engine in real time on the hardware it names; on this CPU instead
// it would be priced and run as CPU serving, a different question. When the backend was chosen
// automatically (no GPU here) and the scenario names no CPU, the scenario is predicted on its
// own hardware: the note says so ("" when it executes as asked).
std::string absent_hardware_note(const Scenario& s, const Backend& backend, const RunArgs& a) {
  if (!s.serve || a.backend != "auto" || backend.name() != "cpu" || s.hardware.empty()) return "";
  for (const Hardware& h : s.hardware)
    if (h.kind == "cpu") return "";
  return fmt::format("no {} here: predicted only (serving executes in real time on the hardware it names; "
                     "--backend cpu runs it on this CPU)",
                     s.hardware.front().name);
}

void write_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// "+dynamic 10 ms" -> "dynamic-10-ms": lowercase letters and digits, each run of anything else
// one '-', none at the ends (a name that is safe in any file system and shell).
std::string slug(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 && u < 128) {
      out += static_cast<char>(std::tolower(u));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

// --vllm-json's file of serve step `step` (counted from 1 in the name):
// <scenario>[-<sweep label>]-<step number>-<step name>[-measured].json.
std::string vllm_file_name(const RunResult& r, std::size_t step, ServeRun which) {
  std::string name = slug(r.scenario);
  if (const std::string label = slug(sweep_label(r.sweep_point)); !label.empty()) name += "-" + label;
  name += fmt::format("-{}", step + 1);
  if (const std::string s = slug(r.serve[step].step); !s.empty()) name += "-" + s;
  if (which == ServeRun::measured) name += "-measured";
  return name + ".json";
}

// Creates --vllm-json's DIR when missing and proves it writable, before anything runs.
void prepare_vllm_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("--vllm-json: '{}' is not a directory", dir));
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError(fmt::format("--vllm-json: cannot create the directory '{}': {}", dir, ec.message()));
  check_writable((fs::path(dir) / ".perfsim-probe").string());
}

// Every serve step of every sweep point into --vllm-json's DIR, and each executed run beside its
// prediction, each file whole or not at all.
void write_vllm_json(const std::string& dir, const std::vector<RunResult>& results,
                     const std::vector<ScenarioPoint>& points, bool quiet) {
  std::size_t files = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::optional<ServeSpec>& spec = points[i].scenario.serve;
    for (std::size_t step = 0; step < results[i].serve.size(); ++step)
      for (ServeRun which : {ServeRun::predicted, ServeRun::measured}) {
        if (which == ServeRun::measured && !results[i].serve[step].executed) continue;
        write_file_atomically((std::filesystem::path(dir) / vllm_file_name(results[i], step, which)).string(),
                              format_vllm_bench_json(results[i], step, spec ? &*spec : nullptr, which));
        ++files;
      }
  }
  if (!quiet)
    fmt::print(stderr, "perfsim: wrote {} file{} to {} (vLLM benchmark JSON)\n", files, files == 1 ? "" : "s", dir);
}

}  // namespace

void add_run_options(CLI::App& cmd, RunArgs& a) {
  cmd.add_option("scenario", a.scenario, "Lua scenario or plain script")->required()->type_name("SCENARIO");
  add_script_options(cmd, a,
                     "Where to execute: auto (CUDA when present, else CPU), cpu, cuda, or none "
                     "(prediction only)");
  add_report_options(cmd, a.format, a.output);
  cmd.add_option("--trace", a.trace,
                 "Write each step's predicted and measured timelines to FILE as Chrome trace-event JSON "
                 "(open it in ui.perfetto.dev or chrome://tracing)")
      ->type_name("FILE");
  cmd.add_option("--vllm-json", a.vllm_json,
                 "Serving scenarios: write each sweep point's and stack step's predicted run into DIR as the "
                 "JSON 'vllm bench serve --save-result' writes, one file each")
      ->type_name("DIR");
  cmd.add_option("--plots", a.plots,
                 "Also draw the report's charts into DIR as SVG and PNG (as 'perfsim plot' does; needs "
                 "python3-matplotlib)")
      ->type_name("DIR");
  cmd.add_flag("-q,--quiet", a.quiet, "No progress or status lines on stderr");
  cmd.add_flag("--no-cache", a.no_cache,
               "On a CPU with no calibrated profile, price from estimates instead of calibrating it once "
               "and keeping the profile in ~/.cache/perfsim (as PERFSIM_NO_CACHE=1 does)");
  cmd.add_option("--gpus", a.gpus,
                 "Run as N ranks on this node (mpirun -np N): a parallel layout of N GPUs executes "
                 "across them, rank 0 reports (CPU ranks with --backend cpu)")
      ->type_name("N")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--rank-timeout", a.rank_timeout,
                 "Seconds a rank may spend executing one step before it ends every rank (a lost peer "
                 "must not hang the run; 0: no limit)")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.footer("'perfsim run SCENARIO --help' also lists the options the script declares.");
}

int cmd_run(const RunArgs& given) {
  // A shipped scenario (scenarios/serve.lua) is found beside an installed binary too.
  RunArgs a = given;
  a.scenario = find_data_path(a.scenario);
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
  const std::string no_serving =
      fmt::format("--vllm-json: {} has no serve{{}} workload (the vLLM benchmark JSON is of serving runs)", a.scenario);
  if (points.empty()) {
    if (!outcome.scenario) {  // a plain script: its prints are the output
      if (!a.vllm_json.empty()) throw UsageError(no_serving);
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
  if (!a.vllm_json.empty()) {
    if (std::none_of(points.begin(), points.end(), [](const ScenarioPoint& p) { return p.scenario.serve.has_value(); }))
      throw UsageError(no_serving);
    if (launched_ranks() == nullptr || launched_ranks()->rank() == 0) prepare_vllm_dir(a.vllm_json);
  }

  ExecutionTarget target;
  // One rank of several (mpirun, srun, --gpus): rank 0 alone shows progress and the report.
  Communicator* ranks = launched_ranks();
  const bool root = ranks == nullptr || ranks->rank() == 0;
  ProgressLine line("run", root && progress_enabled(a.quiet));
  std::vector<RunResult> results;
  results.reserve(points.size());
  std::string busy;                // busy_machine_warning() before the first execution
  std::vector<std::string> notes;  // one line each on stderr after the run
  for (std::size_t i = 0; i < points.size(); ++i) {
    ScenarioPoint& point = points[i];
    Backend* backend = nullptr;
    const Hardware* device_hw = nullptr;
    std::string absent;
    if (a.backend != "none" && point.scenario.execute.enabled) {
      if (!target.backend) {
        target.backend = make_backend(a.backend);
        target.backend->join_ranks(ranks);
      }
      absent = absent_hardware_note(point.scenario, *target.backend, a);
      if (absent.empty()) {
        if (!target.hardware) {
          // Sampled while nothing of perfsim's runs, before the calibration and the measurements.
          const std::optional<double> share = root ? sample_busy_share() : std::nullopt;
          busy = busy_machine_warning(share, std::max(1u, std::thread::hardware_concurrency()));
          target.hardware = device_hardware(*target.backend, a, point.scenario, !busy.empty());
        }
        backend = target.backend.get();
        device_hw = &*target.hardware;
      }
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
    for (ServeStepResult& step : r.serve)
      if (!absent.empty() && step.not_executed.empty()) step.not_executed = absent;
    if (!absent.empty() && notes.empty()) notes.push_back(absent);
    if (r.sweep_point.empty()) r.sweep_point = point.values;
    if (r.model_params == 0) r.model_params = point.scenario.model.params();
    if (r.file.empty()) r.file = point.scenario.file;
    r.unsafe = a.unsafe;
    results.push_back(std::move(r));
  }
  line.clear();  // before the report

  if (!root) return 0;
  if (!a.quiet) {
    for (const std::string& n : notes) fmt::print(stderr, "perfsim: {}\n", n);
    if (!busy.empty()) fmt::print(stderr, "perfsim: warning: {}\n", busy);
    for (const std::string& w : measurement_warnings(results)) fmt::print(stderr, "perfsim: warning: {}\n", w);
  }
  if (!a.trace.empty()) {
    write_file_atomically(a.trace, format_trace(results));
    if (!a.quiet) fmt::print(stderr, "perfsim: wrote {} (trace)\n", a.trace);
  }
  if (!a.vllm_json.empty()) write_vllm_json(a.vllm_json, results, points, a.quiet);
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
    charts.trace = a.trace;  // the timeline chart is drawn from it
    if (!draw_charts_of(format_report(results, ReportFormat::json), a.plots, charts)) return 1;
  }
  return 0;
}

}  // namespace perfsim
