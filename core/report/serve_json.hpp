// A serving run's figures as JSON (the "serve" object of the JSON report), and the rounding the
// serving outputs share: per-request and per-step arrays make these files large, and six
// significant digits are more than the model's accuracy.
#pragma once
#include <nlohmann/json.hpp>

#include "core/run/results.hpp"

namespace perfsim {

// `v` rounded to six significant digits; null when not finite.
[[nodiscard]] nlohmann::ordered_json sig6(double v);

// Every ServeMetrics field by its C++ name, each LatencyStats as {count, mean, median, p90, p99,
// max}; seconds.
[[nodiscard]] nlohmann::ordered_json serve_metrics_json(const ServeMetrics& m);

// {"traffic", "steps": [...]} of a serving run (docs/CLI.md, "--format json"); null when `r` has none.
[[nodiscard]] nlohmann::ordered_json serve_json(const RunResult& r);

}  // namespace perfsim
