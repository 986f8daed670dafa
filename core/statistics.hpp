// Medians and percentiles of samples, shared by measurements, calibration fits and validation.
#pragma once
#include <utility>
#include <vector>

namespace perfsim {

// Median: the middle value, or the mean of the two middle values when the count is even.
// NaN when empty.
[[nodiscard]] double median_of(std::vector<double> values);
// The same, 0 when empty (a figure that was not measured adds nothing).
[[nodiscard]] inline double median_or_zero(std::vector<double> values) {
  return values.empty() ? 0.0 : median_of(std::move(values));
}
// Nearest-rank percentile: the smallest value with at least q·n of the values at or below it,
// i.e. sorted[ceil(q·n) − 1] (q in (0, 1]). NaN when empty.
[[nodiscard]] double percentile_nearest_rank(std::vector<double> values, double q);

}  // namespace perfsim
