// Dispatch rules of perfsim's CUDA kernels that the cost model reads too: the curve a
// calibrated profile prices an op from is the one of the kernel path the op takes
// (calibration.hpp, finer variants), and the workspace it plans is the one that path needs
// (workspace.cpp). One definition for both sides.
#pragma once
#include <cstdint>

namespace perfsim {

// Fused cross-entropy (backends/cuda/kernels/cross_entropy.cu): a row of logits of at most this
// many 16-byte packs (or elements, when the row is not a whole number of packs) is held in
// registers ...
inline constexpr int64_t cross_entropy_register_units = 4096;
// ... else, when the gradient is written, a row of at most this many bytes is copied into
// shared memory (two blocks per SM); wider rows are streamed twice.
inline constexpr int64_t cross_entropy_row_cache_bytes = int64_t{110} << 10;

// Flash attention backward (backends/cuda/kernels/flash_attention_bwd_tc.cu): the tensor-core
// kernel (16-bit elements, head_dim 64 or 128) runs a CTA per query head of each GQA group and
// sums dK/dV in fp32 accumulators, which the workspace holds (core/cost/workspace.cpp).
[[nodiscard]] constexpr bool flash_bwd_splits_gqa_group(int64_t element_bytes, int64_t head_dim, int64_t heads,
                                                        int64_t kv_heads) {
  return element_bytes == 2 && (head_dim == 64 || head_dim == 128) && kv_heads > 0 && heads > kv_heads;
}

}  // namespace perfsim
