// Dispatch rules of perfsim's CUDA kernels that the cost model reads too: the curve a
// calibrated profile prices an op from is the one of the kernel path the op takes
// (calibration.hpp, finer variants), and the workspace it plans is the one that path needs
// (workspace.cpp). One definition for both sides.
#pragma once
#include <algorithm>
#include <cstdint>

namespace perfsim {

// Fused cross-entropy (backends/cuda/kernels/cross_entropy.cu): a row of logits of at most this
// many 16-byte packs (or elements, when the row is not a whole number of packs) is held in
// registers ...
inline constexpr int64_t cross_entropy_register_units = 4096;
// ... else, when the gradient is written, a row of at most this many bytes is copied into
// shared memory (two blocks per SM); wider rows are streamed twice.
inline constexpr int64_t cross_entropy_row_cache_bytes = int64_t{110} << 10;

// Decode attention (backends/cuda/kernels/decode_attention.cu): a KV head's query rows (GQA
// group × queries a sequence) run the tensor-core flash kernel with the group packed into one
// tile when there are several of them, the storage is 16-bit and head_dim 64 or 128: it reads
// each K/V row once for all of them and ran 1.5–2.3× faster than the CUDA-core split-KV kernel
// at 4 rows on an H200 (Llama-3-8B, batch 1–256), 1.3–3.5× at groups of 5 and 8, 3.3–7× at a
// verify pass's 20. One row (multi-head attention decoding), fp32 and other head_dims keep the
// CUDA-core kernel, which reads K/V once per 4 rows. The cost model's decode curves follow
// (decode_q1, decode_q4, decode_qn).
inline constexpr int64_t decode_cuda_core_rows = 1;
[[nodiscard]] constexpr bool decode_takes_tensor_cores(int64_t rows, int64_t element_bytes, int64_t head_dim) {
  return rows > decode_cuda_core_rows && element_bytes == 2 && (head_dim == 64 || head_dim == 128);
}

// Flash attention backward (backends/cuda/kernels/flash_attention_bwd_tc.cu): the tensor-core
// kernel (16-bit elements, head_dim 64 or 128) runs a CTA per query head of each GQA group and
// sums dK/dV in fp32 accumulators, which the workspace holds (core/cost/workspace.cpp).
[[nodiscard]] constexpr bool flash_bwd_splits_gqa_group(int64_t element_bytes, int64_t head_dim, int64_t heads,
                                                        int64_t kv_heads) {
  return element_bytes == 2 && (head_dim == 64 || head_dim == 128) && kv_heads > 0 && heads > kv_heads;
}

// GEMMs on weight-only quantized weights (int8_weights, int4_weights): up to this many rows
// (a decode step's) stream the weight once, dequantizing as they read it (the CUDA kernel
// kernels/quantized_gemm.cu, the CPU's host::quantized_gemv); more rows dequantize the weight
// into a float copy first and run the float GEMM.
inline constexpr int64_t quantized_fused_rows = 8;
// The fused kernels' instantiation for `rows` rows of A: 1, 2, 4 or 8.
[[nodiscard]] constexpr int64_t quantized_rows_class(int64_t rows) {
  return rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : 8;
}
// The CUDA fused kernel (kernels/quantized_gemm.cu): a CTA of 16 warps per 256 columns and
// slice of K, each warp a chunk of the slice's rows read straight from memory 8 at a time,
// each lane 8 columns; the slices of one column tile form a thread-block cluster whose CTAs
// add their sums through distributed shared memory and write C: one kernel, no workspace. It
// takes n and k multiples of 8 and groups of whole batches of 8 rows; other weights dequantize
// first whatever their rows.
inline constexpr int64_t quantized_gemv_tile = 256;
inline constexpr int64_t quantized_gemv_batch_rows = 8;
inline constexpr int64_t quantized_gemv_max_splits = 16;  // a cluster's CTAs (16: Hopper's non-portable size)
[[nodiscard]] constexpr bool quantized_gemv_takes(int64_t m, int64_t n, int64_t k, int64_t group) {
  return m >= 1 && m <= quantized_fused_rows && n % 8 == 0 && k % quantized_gemv_batch_rows == 0 && group > 0 &&
         group % quantized_gemv_batch_rows == 0;
}
// Slices of K (a power of two up to quantized_gemv_max_splits): enough CTAs for two per SM,
// each warp of a slice at least a batch of rows.
[[nodiscard]] constexpr int64_t quantized_gemv_splits(int64_t n, int64_t k, int sm_count) {
  const int64_t tiles = std::max<int64_t>(1, (n + quantized_gemv_tile - 1) / quantized_gemv_tile);
  int64_t s = 1;
  while (s < quantized_gemv_max_splits && tiles * s < 2 * int64_t{std::max(sm_count, 1)} &&
         k >= 2 * s * 16 * quantized_gemv_batch_rows)
    s *= 2;
  return s;
}

}  // namespace perfsim
