// `perfsim calibrate` without the command line: runs the sweeps of a CalibrationPlan on a
// backend and fits them into a calibrated Hardware profile refining the device's catalog
// entry (docs/CALIBRATION.md describes the method).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/calibrate/plan.hpp"
#include "core/calibrate/points.hpp"
#include "core/cost/hardware.hpp"
#include "core/run/backend.hpp"

namespace perfsim {

// Reported after every graph a sweep runs (and once when a sweep starts, with done = 0).
struct CalibrateProgress {
  std::string sweep;       // "gemm bf16", "kernels", "launch", "host copies", "collectives"
  int done = 0;            // graphs (or collective series) finished in this sweep
  int total = 0;
  double sweep_seconds = 0;  // wall time since the sweep started
};

struct CalibrateOptions {
  bool quick = false;
  std::string name;        // profile name; "" = "<base name>-local", lowercased
  std::string date;        // YYYY-MM-DD written into the profile; "" = today (UTC)
  std::function<void(const CalibrateProgress&)> progress;
};

// What one sweep fitted, for the summary table.
struct SweepSummary {
  std::string sweep;
  std::string fitted;      // "launch_eager 6.1 µs, launch_graph 1.9 µs", "skipped: ..."
  int graphs = 0;
  int remeasured = 0;      // graphs measured again: some of their per-op times were impossible
  double seconds = 0;
};

struct CalibrateResult {
  Hardware hw;
  std::vector<SweepSummary> sweeps;
  std::vector<MeasuredPoint> points;  // every timed op the GEMM tables and curves were fitted on
  double wall_seconds = 0;
};

// Runs `plan` on `b` and fits the profile. `base` is the datasheet entry of b's device
// (find_hardware(b.device().catalog_name)); it prices the calibration points and keeps its
// peaks, bandwidth and links except those refitted here. Throws NotExecutable when a sweep
// cannot produce anything (no GEMM cell ran, the launch chain failed).
[[nodiscard]] CalibrateResult calibrate(Backend& b, const Hardware& base, const CalibrationPlan& plan,
                                        const CalibrateOptions& o);
// The same with make_calibration_plan(b.name(), o.quick).
[[nodiscard]] CalibrateResult calibrate(Backend& b, const Hardware& base, const CalibrateOptions& o);

// "h100-sxm-local" for base "H100-SXM" when `name` is empty; else `name`.
[[nodiscard]] std::string profile_name(const std::string& name, const std::string& base);

}  // namespace perfsim
