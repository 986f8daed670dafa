// Elementwise kernels on the GPU, mirroring cpu::gelu/silu_mul/residual_add/rope
// (backends/cpu/cpu_kernels.hpp): n elements, 16-byte vector loads in a grid-stride loop when
// every pointer is 16-byte aligned (a scalar tail covers n not a multiple of the vector).
// Launchers are asynchronous on `stream` and capturable.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

// y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
template <class T> void gelu(const T* x, T* y, int64_t n, cudaStream_t stream);
template <class T> void gelu_bwd(const T* x, const T* dy, T* dx, int64_t n, cudaStream_t stream);
// y = silu(gate) ⊙ up
template <class T> void silu_mul(const T* gate, const T* up, T* y, int64_t n, cudaStream_t stream);
template <class T> void silu_mul_bwd(const T* gate, const T* up, const T* dy, T* dgate, T* dup,
                                     int64_t n, cudaStream_t stream);
template <class T> void residual_add(const T* a, const T* b, T* out, int64_t n,
                                     cudaStream_t stream);
// x, y [tokens, heads, head_dim]; pairs (i, i + d/2) rotate by pos·10000^(−2i/d), token t at
// r.position_of(t). Computed as the CPU reference does (frequency rounded to float, angle
// and sin/cos in double), so the two agree to fp32 rounding even at positions in the thousands.
template <class T> void rope(const T* x, T* y, const ops::RopeShape& r, cudaStream_t stream);
template <class T> void rope_bwd(const T* dy, T* dx, const ops::RopeShape& r, cudaStream_t stream);
// rope with token t at positions[t] (int32 on the device; r.seq and r.position unused), the
// rotation of cpu::rope_at (pointwise.cu).
template <class T> void rope_at(const T* x, const int32_t* positions, T* y, const ops::RopeShape& r,
                                cudaStream_t stream);

}  // namespace perfsim::cuda
