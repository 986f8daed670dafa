// Mixture of experts on the GPU, mirroring cpu::moe_route .. moe_combine_bwd
// (backends/cpu/cpu_kernels.hpp, same shapes and ops::MoeShape). Every output element has one
// writer and sums run in a fixed order, so results repeat bit for bit: the router's slots come
// from a block-level scan per expert over the choices in order, not from atomics. A kernel
// cannot throw: a choice whose expert or slot is out of range is treated as dropped (the CPU
// reference refuses it), and two kept choices naming one buffer row (which moe_route never
// produces) leave that row to either. Launchers are asynchronous on `stream` and capturable.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

// The router runs a warp per token: each lane marks the experts it picked in a 64-bit mask
// (32 lanes × 64 experts) and lane j holds choice j.
inline constexpr int64_t moe_route_max_experts = 32 * 64;
inline constexpr int64_t moe_route_max_top_k = 32;

// Top-k and softmax per token (one kernel), then the slots (a second, one block per expert).
// Throws std::invalid_argument beyond the limits above.
template <class T> void moe_route(const T* logits, float* weights, int32_t* experts, int32_t* slots,
                                  const ops::MoeShape& s, cudaStream_t stream);
// A warp per token; top_k at most moe_route_max_top_k.
template <class T> void moe_route_bwd(const T* logits, const int32_t* experts, const float* dweights,
                                      float* dlogits, const ops::MoeShape& s, cudaStream_t stream);
// The buffers zeroed (a memset), then each token's row copied to its kept slots.
template <class T> void moe_dispatch(const T* x, const int32_t* experts, const int32_t* slots, T* xe,
                                     const ops::MoeShape& s, cudaStream_t stream);
template <class T> void moe_dispatch_bwd(const T* dxe, const int32_t* experts, const int32_t* slots,
                                         T* dx, const ops::MoeShape& s, cudaStream_t stream);
template <class T> void moe_combine(const T* ye, const int32_t* experts, const int32_t* slots,
                                    const float* weights, T* y, const ops::MoeShape& s,
                                    cudaStream_t stream);
// dye zeroed (a memset), then a block per token scales dy into its kept rows and reduces each
// choice's dweights.
template <class T> void moe_combine_bwd(const T* dy, const T* ye, const int32_t* experts,
                                        const int32_t* slots, const float* weights, T* dye,
                                        float* dweights, const ops::MoeShape& s, cudaStream_t stream);

}  // namespace perfsim::cuda
