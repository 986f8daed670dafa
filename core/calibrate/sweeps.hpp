// The sweeps of `perfsim calibrate`, each running its graphs through the Backend and handing
// measured points to the fit (fit.hpp). Internal to calibrate.cpp and its tests.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/calibrate/calibrate.hpp"
#include "core/calibrate/dispatch.hpp"
#include "core/calibrate/fit.hpp"
#include "core/calibrate/plan.hpp"
#include "core/cost/hardware.hpp"
#include "core/run/backend.hpp"

namespace perfsim {

struct SweepContext {
  Backend& backend;
  const Hardware& base;
  const CalibrationPlan& plan;
  std::function<void(const CalibrateProgress&)> progress;
};

// Tells the progress callback about one sweep and times it.
class SweepClock {
 public:
  SweepClock(const SweepContext& ctx, std::string sweep, int total);
  void step();  // one more graph done
  [[nodiscard]] double seconds() const;

 private:
  const SweepContext& m_ctx;
  std::string m_sweep;
  int m_total = 0, m_done = 0;
  std::chrono::steady_clock::time_point m_start;
};

// Per-op medians of the launch chain replayed as planned, and the graphs timed both ways
// (graph mode only: the chain here, the calibration models in sweep_kernels).
struct LaunchSamples {
  std::vector<double> chain;                 // per-op medians in the plan's mode
  std::vector<EagerCase> cases;              // for fit_dispatch
  std::string op_timing;                     // how the chain's ops were timed (Measurement::op_timing)
};
[[nodiscard]] LaunchSamples sweep_launch(const SweepContext& ctx, SweepSummary& s);

// Fills gemm tables (one per dtype the base prices as itself) and GEMM class points.
void sweep_gemm(const SweepContext& ctx, const GemmSweepPlan& gp, double launch_graph, CurveFitter& fit,
                std::map<DType, GemmTable>& tables, std::vector<SweepSummary>& out);

// Curves of GEMMs whose rows are not 16-byte aligned ("gemm/bf16/compute/unaligned"): the
// plan's grid cells with an unaligned leading dimension, within its budgets.
void sweep_unaligned_gemm(const SweepContext& ctx, const GemmSweepPlan& gp, double launch_graph, CurveFitter& fit,
                          std::vector<SweepSummary>& out);

// Model graphs of the calibration cases: kernel curves and eager/graph pairs.
void sweep_kernels(const SweepContext& ctx, double launch_graph, CurveFitter& fit, LaunchSamples& pairs,
                   SweepSummary& s);

// Host link from uploads (pinned, pageable); leaves `hw` untouched when the plan has none.
void sweep_copies(const SweepContext& ctx, Hardware& hw, SweepSummary& s);

// Alpha-beta per (collective, group) over 2, 4, ... gpu_count() GPUs.
void sweep_collectives(const SweepContext& ctx, Calibration& cal, SweepSummary& s);

}  // namespace perfsim
