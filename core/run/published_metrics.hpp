// The figures a published result can be compared on (`perfsim validate --published`): each a
// quantity perfsim predicts, in the unit papers and vendor pages print it.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace perfsim {

struct PublishedMetric {
  std::string_view name;         // as a scenario's published.metric names it
  std::string_view unit;         // what published.value is in
  std::string_view description;
  // true: higher is faster (a throughput); the error is then the implied time's,
  // published / predicted − 1, so that every metric's error reads the same way.
  bool rate = false;
};

[[nodiscard]] std::span<const PublishedMetric> published_metrics();
[[nodiscard]] const PublishedMetric* find_published_metric(std::string_view name);
[[nodiscard]] bool is_published_metric(std::string_view name);
// "step_time, tokens_per_s_per_gpu, ..." for error messages and --help.
[[nodiscard]] std::string published_metric_names();

}  // namespace perfsim
