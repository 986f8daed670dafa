// GEMMs on quantized weights (int8_weights, int4_weights, w8a8), the device side. A weight is
// laid out as host::QuantLayout says (backends/common/quantized_weights.hpp): values [K, N]
// (int8, or int4 two a byte), bf16 scales [K / group][N], bf16 zeros beside them for int4.
//   quantized_gemv        a decode's few rows (≤ quantized_fused_rows): each CTA streams 256
//                         columns of a slice of K once through shared memory, dequantizing as
//                         it reads; the slices of a column tile, one cluster, add up into C
//                         (core/cost/kernel_paths.hpp);
//   dequantize_weight     more rows: the weight as floats [K, N] for the float GEMM;
//   quantize_rows_int8    W8A8's activations: each row to int8 with its own scale, amax / 127;
//   scale_int8_product    W8A8's int32 product times the row's and the column's scales into C.
// Asynchronous on `stream`; fp32 arithmetic throughout, rounding only where C is stored.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_convert.hpp"

namespace perfsim::cuda {

struct QuantWeightView {
  const void* data = nullptr;  // values, then scales, then zeros
  int64_t k = 0, n = 0, group = 0;
  bool int4 = false, zeros = false;
  std::size_t scale_offset = 0, zero_offset = 0;  // bytes from data
};

// quantized_gemv_splits (core/cost/kernel_paths.hpp) on the current device's SMs.
[[nodiscard]] int64_t quantized_gemv_splits_here(int64_t n, int64_t k);
// Whether quantized_gemv takes this weight with m rows (quantized_gemv_takes, and 16-byte
// aligned scales and data); otherwise the GEMM dequantizes first.
[[nodiscard]] bool quantized_gemv_fits(const QuantWeightView& w, int64_t m);
// c [m, n] (+)= a [m, K] · the weight, in `splits` slices of K summed in a cluster; a: f32,
// bf16 or f16 (16-byte aligned); c: f32, bf16 or f16.
void quantized_gemv(const void* a, Elem a_type, int64_t m, const QuantWeightView& w, int64_t splits, void* c,
                    Elem c_type, bool accumulate, cudaStream_t stream);
// out [K, N] = the dequantized weight in out_type (f32, bf16 or f16).
void dequantize_weight(const QuantWeightView& w, void* out, Elem out_type, cudaStream_t stream);
// q [m, k] int8 = round(a / s) with s = max|row| / 127 per row (row_scales[m]; 0 for a zero row).
void quantize_rows_int8(const void* a, Elem a_type, int64_t m, int64_t k, int8_t* q, float* row_scales,
                        cudaStream_t stream);
// c [m, n] = acc · row_scales[m] · col_scales[n] (+ c when accumulate); col_scales: bf16 [n].
void scale_int8_product(const int32_t* acc, const float* row_scales, const void* col_scales, int64_t m, int64_t n,
                        void* c, Elem c_type, bool accumulate, cudaStream_t stream);

}  // namespace perfsim::cuda
