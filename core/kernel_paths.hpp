// Dispatch limits of perfsim's CUDA kernels that the cost model reads too, so that the curve a
// calibrated profile prices an op from is the one of the kernel path the op takes
// (calibration.hpp, finer variants). One definition for both sides.
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

}  // namespace perfsim
