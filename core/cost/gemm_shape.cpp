#include "core/cost/gemm_shape.hpp"

#include <algorithm>

namespace perfsim {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

GemmShapeEfficiency gemm_shape_efficiency(int64_t m, int64_t n, int64_t k, int64_t batch, int sms) {
  GemmShapeEfficiency e;
  if (sms <= 0 || m <= 0 || n <= 0 || k <= 0 || batch <= 0) return e;
  e.tiles = ceil_div(m, gemm_tile) * ceil_div(n, gemm_tile) * batch;
  // Under one wave: split K so that the work units come closest to one per SM, each split
  // keeping at least two tiles' depth of K.
  if (e.tiles < sms) e.splits = std::max<int64_t>(1, std::min(sms / e.tiles, k / (2 * gemm_tile)));
  const int64_t units = e.tiles * e.splits;
  e.waves = ceil_div(units, sms);
  e.wave = static_cast<double>(units) / static_cast<double>(e.waves * sms);
  const double k_per_split = static_cast<double>(k) / static_cast<double>(e.splits);
  e.k_loop = k_per_split / (k_per_split + gemm_k_overhead);
  return e;
}

}  // namespace perfsim
