// What the LayerNorm and RMSNorm kernels share: the contract of a norm policy, and the helpers
// both directions use (norm_forward.cuh, norm_backward.cuh). The kernels and their launchers
// are written once, templated on a policy P that holds only the math telling the two norms
// apart; layernorm.cu and rmsnorm.cu each define their policy next to the entry points of
// norms.cuh that use it. One translation unit per norm keeps each small and lets the two
// compile in parallel, and puts each norm's math in one place.
//
// A norm policy P provides:
//   centered       statistics about the row mean (x − mean), else about 0 (x itself)
//   has_bias       beta in the forward, dbeta partials in the backward
//   fwd_holds_row  the forward holds the row in registers when it fits (row_regs.cuh), else it
//                  sweeps the row; holding needs an uncentered norm without bias
//   bwd_sums       how many per-element sums the backward reduces per row;
//                  bwd_add(acc, d, dy, gamma) adds one element's, with d = x − c (c: the mean,
//                  a shift, or nothing when uncentered) and g = dy·gamma
//   terms_about_mean(acc, mean, cols, eps)    the row's RowTerms (norm_backward.cuh) from the
//                  bwd_sums taken about the exact mean (the sweeping backward kernel)
//   terms_about_shift(acc, shift, cols, eps)  the same from one reduction about a shift K:
//                  acc[0] = Σ (x − K) when centered, then the bwd_sums (the held-row kernel)
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda::detail {

// Calls launch(integral_constant<int, V>) with the 16-byte pack width of T, or 1.
template <class T, class F>
void dispatch_vec(bool vectorizable, F launch) {
  if (vectorizable) launch(std::integral_constant<int, vec_of<T>>{});
  else launch(std::integral_constant<int, 1>{});
}

// x − c for a centered norm; x itself otherwise (no subtraction at all).
template <class P>
__device__ __forceinline__ float centre(float x, float c) {
  if constexpr (P::centered) return x - c;
  else return x;
}

// rstd = 1/sqrt(Σ d² / cols + eps).
__device__ __forceinline__ float rstd_of(float sum_sq, int64_t cols, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(cols) + eps);
}

// Σ f(x) over the block's row `xr` (one sweep and a block reduction): every thread gets it.
template <class T, int V, class F>
__device__ float row_sum(const T* xr, int64_t cols, F f) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float s[1] = {0.0f};
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    load_f32<T, V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) s[0] += f(v[i]);
  }
  block_sum(s);
  return s[0];
}

// Mean of the block's row `xr`.
template <class T, int V>
__device__ float row_mean(const T* xr, int64_t cols) {
  return row_sum<T, V>(xr, cols, [](float x) { return x; }) / static_cast<float>(cols);
}

}  // namespace perfsim::cuda::detail
