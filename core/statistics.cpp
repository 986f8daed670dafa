// Medians and percentiles (statistics.hpp).
#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace perfsim {

namespace {
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) return nan;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double percentile_nearest_rank(std::vector<double> values, double q) {
  if (values.empty()) return nan;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  // ceil(q·n) computed with a small tolerance so 0.9 × 10 is rank 9, not 10 (0.9·10 rounds up
  // in binary floating point).
  const double rank = std::ceil(q * n - 1e-9);
  const std::size_t index = static_cast<std::size_t>(std::clamp(rank, 1.0, n)) - 1;
  return values[index];
}

}  // namespace perfsim
