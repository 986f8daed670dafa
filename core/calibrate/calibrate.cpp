// calibrate(): the sweeps in order (launch, GEMM grid, kernel curves, host copies,
// collectives) and the calibrated profile assembled from their fits.
#include "core/calibrate/calibrate.hpp"
#include "core/kernel_fingerprint.hpp"

#include <fmt/format.h>

#include <chrono>
#include <ctime>

#include "core/calibrate/engine_attention.hpp"
#include "core/calibrate/engine_host.hpp"
#include "core/calibrate/sweeps.hpp"
#include "core/errors.hpp"
#include "core/text.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// Class fallbacks: the median efficiency of each class's points, by bound, over the base's.
void merge_class_medians(std::map<OpClass, double>& into, const std::map<OpClass, double>& medians) {
  for (const auto& [cls, eff] : medians) into[cls] = eff;
}

}  // namespace

std::string profile_name(const std::string& name, const std::string& base) {
  return name.empty() ? to_lower(base + "-local") : name;
}

CalibrateResult calibrate(Backend& b, const Hardware& base, const CalibrationPlan& plan,
                          const CalibrateOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const SweepContext ctx{b, base, plan, o.progress};
  CalibrateResult r;
  Hardware& hw = r.hw;
  hw = base;
  hw.calibration = Calibration{};

  // 1. The launch floor first: every other sweep subtracts it from its per-op times.
  SweepSummary launch;
  launch.sweep = "launch";
  LaunchSamples samples = sweep_launch(ctx, launch);
  const double launch_graph = fit_launch_graph(samples.chain);

  // 2. GEMM grids (aligned tables, unaligned curves), 3. kernel curves from the calibration models' graphs.
  CurveFitter fit;
  std::vector<SweepSummary> gemm;
  sweep_gemm(ctx, plan.gemm, launch_graph, fit, hw.calibration.gemm, gemm);
  sweep_gemm(ctx, plan.fp8_gemm, launch_graph, fit, hw.calibration.gemm, gemm);
  sweep_unaligned_gemm(ctx, plan.unaligned_gemm, launch_graph, fit, gemm);
  if (hw.calibration.gemm.empty())
    throw NotExecutable(fmt::format("calibrate: no GEMM cell could be measured on the {} backend", b.name()));
  SweepSummary kernels;
  kernels.sweep = "kernels";
  sweep_kernels(ctx, launch_graph, fit, samples, kernels);
  SweepSummary engine_attention;
  sweep_engine_attention(ctx, launch_graph, fit, engine_attention);
  hw.calibration.kernels = fit.curves();
  r.points = fit.recorded();
  drop_curves_shadowed_by_tables(hw.calibration.gemm, hw.calibration.kernels);
  merge_class_medians(hw.compute_efficiency, fit.class_medians(true));
  merge_class_medians(hw.memory_efficiency, fit.class_medians(false));
  if (kernels.fitted.empty())
    kernels.fitted = fmt::format("{} curves from {} points", hw.calibration.kernels.size(), fit.point_count());
  else
    kernels.fitted = fmt::format("{} curves from {} points; {}", hw.calibration.kernels.size(),
                                 fit.point_count(), kernels.fitted);

  // The eager launch path from graphs timed both ways: the host's dispatch per op kind and
  // the device's extra cost per eager launch, fitted through the host-paced timeline. Without
  // a graph mode (CPU) both launches are the floor and nothing waits for a host.
  hw.launch_graph = launch_graph;
  hw.launch_eager = launch_graph;
  hw.launch_wait = 0;
  hw.dispatch_eager = 0;
  hw.dispatch_by_kind.clear();
  hw.dispatch_fixed_by_kind.clear();
  if (!samples.cases.empty()) {
    const DispatchFit df = fit_dispatch(samples.cases, launch_graph);
    hw.launch_eager = df.launch_eager;
    hw.launch_wait = df.launch_wait;
    hw.dispatch_eager = df.dispatch_eager;
    hw.dispatch_by_kind = df.by_kind;
    hw.dispatch_fixed_by_kind = df.fixed_by_kind;
    launch.fitted = fmt::format(
        "launch_eager {}, launch_graph {}, launch_wait {}, host dispatch {} (median of {} kinds; {} "
        "graphs, eager steps within {:.1f}% median)",
        format_duration(hw.launch_eager), format_duration(hw.launch_graph), format_duration(hw.launch_wait),
        format_duration(hw.dispatch_eager), hw.dispatch_by_kind.size(), samples.cases.size(),
        100 * df.step_error);
  } else {
    launch.fitted = fmt::format("launch_eager {}, launch_graph {} (no graph mode: eager = graph)",
                                format_duration(hw.launch_eager), format_duration(hw.launch_graph));
  }
  // The measured step is the sum of its ops: no per-step host work beyond them to add.
  hw.host_overhead = 0;

  // The executed serving engine's host work per step (its own figure: the steps above are
  // timed without it).
  SweepSummary engine;
  sweep_engine_host(ctx, hw, engine);

  // 4. Host link (needs launch_eager), 5. collectives.
  SweepSummary copies;
  copies.sweep = "host copies";
  sweep_copies(ctx, hw, copies);
  SweepSummary coll;
  coll.sweep = "collectives";
  sweep_collectives(ctx, hw.calibration, coll);

  const DeviceInfo d = b.device();
  const std::string date = o.date.empty() ? today_utc() : o.date;
  hw.name = profile_name(o.name, base.name);
  hw.base = base.name;
  hw.calibrated = true;
  hw.source = "perfsim calibrate " + date;
  hw.calibration.measured_on = Provenance{d.backend, d.name,          d.driver,          d.runtime,
                                             date,      plan.mode,       samples.op_timing,
                                             std::string(kernel_fingerprint(d.backend))};

  r.sweeps.push_back(launch);
  for (SweepSummary& s : gemm) r.sweeps.push_back(std::move(s));
  r.sweeps.push_back(kernels);
  r.sweeps.push_back(engine_attention);
  r.sweeps.push_back(engine);
  r.sweeps.push_back(copies);
  r.sweeps.push_back(coll);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

CalibrateResult calibrate(Backend& b, const Hardware& base, const CalibrateOptions& o) {
  return calibrate(b, base, make_calibration_plan(b.name(), o.quick), o);
}

}  // namespace perfsim
