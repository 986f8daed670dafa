// Per-call quantization of a GEMM's activation operand to fp8 e4m3 with a per-tensor scale
// amax(|x|) / 448 (Transformer Engine's "current scaling"), in at most two launches and no
// memset, so an fp8 GEMM costs one small kernel more than a bf16 one at decode sizes:
//   n <= fp8_single_block_max: one kernel, one block: absmax over x, then the scaled cast
//     (the second read of x comes from L1/L2);
//   larger: block b of a partials kernel writes max|x| over its grid-stride slice to
//     workspace[b]; every block of the cast kernel reduces those partials (a few KiB from L2)
//     before casting its slice, and block 0 writes the scale.
// The bytes equal quantize_e4m3's (cuda_convert.hpp): same scale, q = e4m3(x * (1/scale))
// saturating to ±448. Asynchronous on `stream`, capturable; x [n], q [n], scale [1].
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_convert.hpp"

namespace perfsim::cuda {

// Up to this many elements the single-block kernel runs (decode activations).
inline constexpr int64_t fp8_single_block_max = int64_t{1} << 16;

// Device workspace (bytes) quantize_activation_e4m3 needs for n elements.
[[nodiscard]] std::size_t fp8_activation_workspace_bytes(int64_t n);

// q = e4m3(x / scale), *scale = amax(|x|) / 448 (1 when x is all zero). x_type: f32, bf16 or
// f16. workspace: fp8_activation_workspace_bytes(n) bytes, no initial contents needed.
void quantize_activation_e4m3(const void* x, Elem x_type, uint8_t* q, float* scale, void* workspace, int64_t n,
                              cudaStream_t stream);

}  // namespace perfsim::cuda
