// Mixture-of-experts row moves between token order [T, h] and the experts' buffers [E, C, h]
// (shapes in moe.cuh). Dispatch, its backward and combine: one thread per 16-byte chunk of a
// token row, visiting the token's k choices in order (a copy to each kept row, or a sum over
// them in fp32). Combine's backward: a block per token, writing w·dy into each kept row and
// reducing dy·ye over the row for each choice's dweights. The buffers' unused rows are zeroed
// by a memset first.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/moe.cuh"

namespace perfsim::cuda {

namespace {

// The buffer row choice i fills, or −1 when it was dropped (or names no row of the buffers).
__device__ __forceinline__ int64_t buffer_row(const int32_t* experts, const int32_t* slots, int64_t i,
                                              const ops::MoeShape& s) {
  const int64_t e = experts[i], slot = slots[i];
  if (slot < 0 || slot >= s.capacity || e < 0 || e >= s.experts) return -1;
  return e * s.capacity + slot;
}

template <class T, int V>
__global__ void dispatch_kernel(const T* __restrict__ x, const int32_t* __restrict__ experts,
                                const int32_t* __restrict__ slots, T* __restrict__ xe, ops::MoeShape s) {
  using P = detail::Pack<T, V>;
  const int64_t per_row = s.hidden / V;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < s.tokens * per_row;
       w += stride) {
    const int64_t t = w / per_row, c = (w % per_row) * V;
    const P v = *reinterpret_cast<const P*>(x + t * s.hidden + c);  // bits as they are
    for (int64_t i = t * s.top_k; i < (t + 1) * s.top_k; ++i) {
      const int64_t row = buffer_row(experts, slots, i, s);
      if (row >= 0) *reinterpret_cast<P*>(xe + row * s.hidden + c) = v;
    }
  }
}

// Token row chunk = after · Σ over kept choices of (weights ? weights[i] : 1)·buffer row chunk.
template <class T, int V>
__global__ void gather_kernel(const T* __restrict__ buffers, const int32_t* __restrict__ experts,
                              const int32_t* __restrict__ slots, const float* __restrict__ weights,
                              T* __restrict__ out, float after, ops::MoeShape s) {
  const int64_t per_row = s.hidden / V;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < s.tokens * per_row;
       w += stride) {
    const int64_t t = w / per_row, c = (w % per_row) * V;
    float acc[V] = {};
    for (int64_t i = t * s.top_k; i < (t + 1) * s.top_k; ++i) {
      const int64_t row = buffer_row(experts, slots, i, s);
      if (row < 0) continue;
      float v[V];
      detail::load_f32<T, V>(buffers + row * s.hidden + c, v);
      const float scale = weights != nullptr ? weights[i] : 1.0f;
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] += scale * v[u];  // × 1 is exact: a plain sum
    }
    if (after != 1.0f) {
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] *= after;
    }
    detail::store_f32<T, V>(out + t * s.hidden + c, acc);
  }
}

// Block t: for each choice in order, dye row = w·dy[t] and dweights = Σ dy[t]·ye row.
template <class T, int V>
__global__ void combine_bwd_kernel(const T* __restrict__ dy, const T* __restrict__ ye,
                                   const int32_t* __restrict__ experts, const int32_t* __restrict__ slots,
                                   const float* __restrict__ weights, T* __restrict__ dye,
                                   float* __restrict__ dweights, ops::MoeShape s) {
  const int64_t t = blockIdx.x;
  const T* g = dy + t * s.hidden;
  for (int64_t i = t * s.top_k; i < (t + 1) * s.top_k; ++i) {
    const int64_t row = buffer_row(experts, slots, i, s);  // the same for the whole block
    if (row < 0) {
      if (threadIdx.x == 0) dweights[i] = 0.0f;
      continue;
    }
    const float wi = s.expert_grad_scale * weights[i];
    float dot[1] = {0.0f};
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < s.hidden; c += static_cast<int64_t>(blockDim.x) * V) {
      float gv[V], ev[V], out[V];
      detail::load_f32<T, V>(g + c, gv);
      detail::load_f32<T, V>(ye + row * s.hidden + c, ev);
#pragma unroll
      for (int u = 0; u < V; ++u) {
        dot[0] += gv[u] * ev[u];
        out[u] = wi * gv[u];
      }
      detail::store_f32<T, V>(dye + row * s.hidden + c, out);
    }
    detail::block_sum(dot);
    if (threadIdx.x == 0) dweights[i] = dot[0];
  }
}

// 16-byte chunks when every row starts on a 16-byte boundary.
template <class T>
bool vectorizable(const ops::MoeShape& s, const void* a, const void* b) {
  return s.hidden % detail::vec_of<T> == 0 && detail::aligned(16, a, b);
}

template <class T>
void zero_buffers(T* buffers, const ops::MoeShape& s, cudaStream_t stream) {
  const auto bytes = static_cast<size_t>(s.experts * s.capacity * s.hidden) * sizeof(T);
  if (bytes > 0) PERFSIM_CUDA_CHECK(cudaMemsetAsync(buffers, 0, bytes, stream));
}

template <class T>
void gather(const T* buffers, const int32_t* experts, const int32_t* slots, const float* weights, float after,
            T* out, const ops::MoeShape& s, cudaStream_t stream) {
  if (s.tokens <= 0 || s.hidden <= 0) return;
  constexpr int threads = 256, vec = detail::vec_of<T>;
  if (vectorizable<T>(s, buffers, out))
    gather_kernel<T, vec><<<detail::grid_for(s.tokens * s.hidden / vec, threads), threads, 0, stream>>>(
        buffers, experts, slots, weights, out, after, s);
  else
    gather_kernel<T, 1><<<detail::grid_for(s.tokens * s.hidden, threads), threads, 0, stream>>>(
        buffers, experts, slots, weights, out, after, s);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void moe_dispatch(const T* x, const int32_t* experts, const int32_t* slots, T* xe, const ops::MoeShape& s,
                  cudaStream_t stream) {
  zero_buffers(xe, s, stream);
  if (s.tokens <= 0 || s.hidden <= 0) return;
  constexpr int threads = 256, vec = detail::vec_of<T>;
  if (vectorizable<T>(s, x, xe))
    dispatch_kernel<T, vec><<<detail::grid_for(s.tokens * s.hidden / vec, threads), threads, 0, stream>>>(
        x, experts, slots, xe, s);
  else
    dispatch_kernel<T, 1><<<detail::grid_for(s.tokens * s.hidden, threads), threads, 0, stream>>>(
        x, experts, slots, xe, s);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void moe_dispatch_bwd(const T* dxe, const int32_t* experts, const int32_t* slots, T* dx, const ops::MoeShape& s,
                      cudaStream_t stream) {
  // The experts' gradient came in scaled by expert_grad_scale (moe_combine_bwd): the tokens' is not.
  gather(dxe, experts, slots, nullptr, 1.0f / s.expert_grad_scale, dx, s, stream);
}

template <class T>
void moe_combine(const T* ye, const int32_t* experts, const int32_t* slots, const float* weights, T* y,
                 const ops::MoeShape& s, cudaStream_t stream) {
  gather(ye, experts, slots, weights, 1.0f, y, s, stream);
}

template <class T>
void moe_combine_bwd(const T* dy, const T* ye, const int32_t* experts, const int32_t* slots, const float* weights,
                     T* dye, float* dweights, const ops::MoeShape& s, cudaStream_t stream) {
  zero_buffers(dye, s, stream);
  if (s.tokens <= 0) return;
  constexpr int vec = detail::vec_of<T>;
  const auto blocks = static_cast<unsigned>(s.tokens);
  if (vectorizable<T>(s, dy, ye) && detail::aligned(16, dye))
    combine_bwd_kernel<T, vec><<<blocks, detail::row_threads(s.hidden / vec), 0, stream>>>(
        dy, ye, experts, slots, weights, dye, dweights, s);
  else
    combine_bwd_kernel<T, 1><<<blocks, detail::row_threads(s.hidden), 0, stream>>>(dy, ye, experts, slots, weights,
                                                                                   dye, dweights, s);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

#define PERFSIM_CUDA_INSTANTIATE_MOE(T)                                                                      \
  template void moe_dispatch<T>(const T*, const int32_t*, const int32_t*, T*, const ops::MoeShape&,            \
                                cudaStream_t);                                                               \
  template void moe_dispatch_bwd<T>(const T*, const int32_t*, const int32_t*, T*, const ops::MoeShape&,        \
                                    cudaStream_t);                                                           \
  template void moe_combine<T>(const T*, const int32_t*, const int32_t*, const float*, T*, const ops::MoeShape&, \
                               cudaStream_t);                                                                \
  template void moe_combine_bwd<T>(const T*, const T*, const int32_t*, const int32_t*, const float*, T*, float*, \
                                   const ops::MoeShape&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_MOE(float)
PERFSIM_CUDA_INSTANTIATE_MOE(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_MOE(__half)

}  // namespace perfsim::cuda
