#include "core/run/published_metrics.hpp"

#include <array>

namespace perfsim {

namespace {

constexpr std::array<PublishedMetric, 7> metrics{{
    {"step_time", "s", "seconds per step (a training iteration, a decode step)", false},
    {"tokens_per_s_per_gpu", "tokens/s/GPU", "tokens a step processes per second, per GPU of the layout", true},
    {"model_tflops_per_gpu", "TFLOP/s", "model FLOPs (no recomputation) per second per GPU", true},
    {"hardware_tflops_per_gpu", "TFLOP/s",
     "FLOPs performed, recomputation included, per second per GPU (Megatron-LM's teraFLOP/s per GPU)", true},
    {"output_tokens_per_s", "tokens/s", "serving: output tokens per second over the run, every GPU together", true},
    {"ttft_mean", "s", "serving: mean time to first token", false},
    {"tpot_mean", "s", "serving: mean time per output token after the first", false},
}};

}  // namespace

std::span<const PublishedMetric> published_metrics() { return metrics; }

const PublishedMetric* find_published_metric(std::string_view name) {
  for (const PublishedMetric& m : metrics)
    if (m.name == name) return &m;
  return nullptr;
}

bool is_published_metric(std::string_view name) { return find_published_metric(name) != nullptr; }

std::string published_metric_names() {
  std::string out;
  for (const PublishedMetric& m : metrics) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

}  // namespace perfsim
