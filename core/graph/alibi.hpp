// ALiBi, attention with linear biases (Press et al. 2022, "Train Short, Test Long", §3): no
// position embedding; head h adds −m_h·(i − j) to the score of the query at position i against
// the key at position j ≤ i, after the 1/sqrt(head_dim) scaling.
#pragma once
#include <cmath>
#include <cstdint>

namespace perfsim {

// Head `head` (0-based) of `heads`: m = 2^(−8(head + 1)/heads) for a power of two (1/2, 1/4, …,
// 1/256 for 8 heads). Otherwise, as the paper's reference code does, the first n = 2^⌊log2 heads⌋
// heads take n's slopes and the rest every other slope of 2n, starting with its first:
// 2^(−4(2k + 1)/n) for k = 0, 1, ….
[[nodiscard]] inline double alibi_slope(int64_t head, int64_t heads) {
  int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  if (head < n) return std::exp2(-8.0 * static_cast<double>(head + 1) / static_cast<double>(n));
  return std::exp2(-4.0 * static_cast<double>(2 * (head - n) + 1) / static_cast<double>(n));
}

// The bias of the query at position `query` against the key at `key`: −m·|query − key|, which is
// −m·(i − j) on the keys a causal query sees.
[[nodiscard]] inline double alibi_bias(double slope, int64_t query, int64_t key) {
  return -slope * static_cast<double>(query > key ? query - key : key - query);
}

}  // namespace perfsim
