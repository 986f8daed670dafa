// A quantized weight in a backend's buffer (int8_weights, int4_weights, w8a8): a linear layer's
// weight stored [K, N] as the graph has it (row k: input k of every output channel), then its
// scales and zero points, and the host's reference of filling and dequantizing it.
//   values: int8, one a byte (−127..127), or int4, two a byte (0..15; element i = k·N + n in
//           byte i / 2, the low nibble for even i), in that order;
//   scales: bf16 [K / group][N], one per group of `group` inputs of each output channel, a
//           row of N per group as GPTQ stores them (a GPU thread reading N-consecutive values
//           reads N-consecutive scales);
//   zeros:  bf16 [K / group][N] beside them when the format has zero points (int4).
// Element (k, n) = (q − zero) · scale with the scale and zero of group (k / group)·N + n
// (zero 0 without zero points). A GPU backend may store a weight otherwise (W8A8's int8 GEMM
// reads [N, K]); what it computes is this layout's values.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/graph/graph.hpp"

namespace perfsim::host {

struct QuantLayout {
  int64_t k = 0, n = 0, group = 0;
  bool int4 = false, zeros = false;

  [[nodiscard]] int64_t groups_per_channel() const { return k / group; }
  [[nodiscard]] std::size_t value_bytes() const {
    const auto e = static_cast<std::size_t>(k * n);
    return int4 ? (e + 1) / 2 : e;
  }
  [[nodiscard]] std::size_t scale_offset() const { return value_bytes(); }
  [[nodiscard]] std::size_t zero_offset() const {
    return value_bytes() + static_cast<std::size_t>(n * groups_per_channel()) * 2;
  }
  [[nodiscard]] std::size_t bytes() const {
    return value_bytes() + static_cast<std::size_t>(n * groups_per_channel()) * 2 * (zeros ? 2 : 1);
  }
  [[nodiscard]] int64_t group_of(int64_t row, int64_t col) const { return row / group * n + col; }
};

// The layout of weight `t` ([K, N], quant_group > 0); nullopt-like k = 0 for any other tensor.
[[nodiscard]] inline QuantLayout quant_layout(const Tensor& t) {
  QuantLayout q;
  if (t.quant_group <= 0 || t.shape.size() != 2) return q;
  q.k = t.shape[0];
  q.n = t.shape[1];
  q.group = t.quant_group;
  q.int4 = t.dtype == DType::int4;
  q.zeros = t.quant_zeros;
  return q;
}

// Random int8 or int4 values, scales of 0.02 / 127 (int8) or 0.02 / 8 (int4) times a factor
// between 0.5 and 1.5 per group, zero points 8 (int4): values near N(0, 0.02) as the unquantized
// weights are drawn.
void fill_quantized(void* data, const QuantLayout& q, uint64_t seed);
// out [K, N] fp32 = the dequantized weight (the reference every backend's kernels match).
void dequantize(const void* data, const QuantLayout& q, float* out);
// out [m, N] = a [m, K] · the dequantized weight, fused (each thread streams a block of
// columns through every row of the weight, dequantizing as it reads): a decode's few rows
// without the weight's fp32 copy.
void quantized_gemv(const float* a, int64_t m, const void* data, const QuantLayout& q, float* out);
// x [rows, cols] fp32 in place: each row quantized to int8 with its own scale, max|row| / 127,
// and back (W8A8's activations as its GEMM reads them).
void fake_quantize_rows(float* x, int64_t rows, int64_t cols);

}  // namespace perfsim::host
