// A serving run's figures as JSON (the "serve" object of the JSON report), and what the serving
// outputs share: the rounding (per-request and per-step arrays make these files large, and six
// significant digits are more than the model's accuracy) and the executed engine steps' figures.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>

#include "core/run/results.hpp"

namespace perfsim {

// `v` rounded to six significant digits; null when not finite.
[[nodiscard]] nlohmann::ordered_json sig6(double v);

// Every ServeMetrics field by its C++ name, each LatencyStats as {count, mean, median, p90, p99,
// max}; seconds.
[[nodiscard]] nlohmann::ordered_json serve_metrics_json(const ServeMetrics& m);

// An executed run's engine steps of one kind against the cost model's price of the same batches.
// Error: (price − measured wall) / measured wall, per step. Shares: per step over its wall time,
// averaged over the steps. NaN where there are no steps.
struct ExecutedStepFigures {
  int64_t steps = 0;
  double wall_median = 0, wall_p90 = 0;
  double predicted_median = 0;
  double error_median = 0;  // signed: positive when the cost model prices the batch slower
  double abs_error_median = 0;
  double host_share = 0;    // the engine's host work (building the step, writing its inputs)
  double device_share = 0;  // the device's time
  // The kernels' prediction alone: (price − its host part − device) / device, the engine's own
  // host work (which the profile's engine_host_per_step and engine_host_per_op price) left out on both sides.
  double device_error_median = 0;
  double host_median = 0;   // seconds of host work per step
};

struct ExecutedStepSummary {
  ExecutedStepFigures all;
  ExecutedStepFigures decode;   // steps of decodes only
  ExecutedStepFigures prefill;  // steps computing some prompt tokens
};

[[nodiscard]] ExecutedStepSummary summarize_executed_steps(const ServeStepResult::Executed& e);

// {"traffic", "steps": [...]} of a serving run (docs/CLI.md, "--format json"); null when `r` has none.
[[nodiscard]] nlohmann::ordered_json serve_json(const RunResult& r);

}  // namespace perfsim
