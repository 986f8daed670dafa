// Derived comparisons between predictions and measurements (defined in docs/COST_MODEL.md).
#include "core/run/results.hpp"

#include <limits>

namespace perfsim {

double step_tokens(const StepResult& s) {
  return s.layout ? s.layout->tokens_per_step : s.graph.workload.tokens_per_step();
}

double relative_error(double predicted, double measured) {
  // Signed: positive when the model over-predicts. Undefined without a measurement.
  if (measured == 0) return std::numeric_limits<double>::quiet_NaN();
  return (predicted - measured) / measured;
}

double speedup(double base_time, double base_tokens, double time, double tokens) {
  // A throughput ratio, so steps that change the work per step (batching) compare fairly.
  if (base_time <= 0 || time <= 0 || base_tokens <= 0 || tokens <= 0)
    return std::numeric_limits<double>::quiet_NaN();
  return (tokens / time) / (base_tokens / base_time);
}

std::string sweep_label(const std::map<std::string, std::string>& values) {
  std::string out;
  for (const auto& [k, v] : values) {
    if (!out.empty()) out += ", ";
    out += k + "=" + v;
  }
  return out;
}

}  // namespace perfsim
