// Row softmax of materialized attention scores with the causal mask, and its backward.
// S, P, dP, dS [b, h, sq, skv]; row r = ((b·h + head)·sq + i) sees kv positions
// j < visible(i) (all of them when not causal); masked entries of P are written as 0.
// One block per row: sweep 1 keeps an online (max, Σexp) pair per thread (Milakov &
// Gimelshein 2018), merged over the block; sweep 2 writes. The backward's dS = P ⊙ (dP − Σ dP⊙P)
// is likewise a reduction sweep then a write sweep.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_materialized.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda {

namespace {

template <class T, int V>
__global__ void softmax_kernel(const T* __restrict__ s, T* __restrict__ p, int64_t sq, int64_t skv,
                               bool causal) {
  const int64_t row = blockIdx.x, i = row % sq;
  int64_t vis = causal ? skv - sq + i + 1 : skv;
  vis = vis < skv ? vis : skv;
  const T* sr = s + row * skv;
  T* pr = p + row * skv;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float m = -INFINITY, sum = 0.0f;
#pragma unroll 4
  for (int64_t c = threadIdx.x * V; c < vis; c += step) {
    float v[V];
    detail::load_f32<T, V>(sr + c, v);
    float vm = -INFINITY;
#pragma unroll
    for (int e = 0; e < V; ++e) vm = c + e < vis ? fmaxf(vm, v[e]) : vm;
    if (vm > m) {
      sum *= expf(m - vm);
      m = vm;
    }
#pragma unroll
    for (int e = 0; e < V; ++e) sum += c + e < vis ? expf(v[e] - m) : 0.0f;
  }
  const float mx = detail::block_max(m);
  float tot[1] = {m == -INFINITY ? 0.0f : sum * expf(m - mx)};
  detail::block_sum(tot);
  const float inv = tot[0] > 0.0f ? 1.0f / tot[0] : 0.0f;
  for (int64_t c = threadIdx.x * V; c < skv; c += step) {
    float v[V], o[V];
    if (c < vis) detail::load_f32<T, V>(sr + c, v);
#pragma unroll
    for (int e = 0; e < V; ++e) o[e] = c + e < vis ? expf(v[e] - mx) * inv : 0.0f;
    detail::store_f32<T, V>(pr + c, o);
  }
}

template <class T, int V>
__global__ void softmax_bwd_kernel(const T* __restrict__ p, const T* __restrict__ dp,
                                   T* __restrict__ ds, int64_t skv) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * skv;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float dot[1] = {0.0f};
  for (int64_t c = threadIdx.x * V; c < skv; c += step) {
    float pv[V], gv[V];
    detail::load_f32<T, V>(p + off + c, pv);
    detail::load_f32<T, V>(dp + off + c, gv);
#pragma unroll
    for (int e = 0; e < V; ++e) dot[0] += pv[e] * gv[e];
  }
  detail::block_sum(dot);
  for (int64_t c = threadIdx.x * V; c < skv; c += step) {
    float pv[V], gv[V], o[V];
    detail::load_f32<T, V>(p + off + c, pv);
    detail::load_f32<T, V>(dp + off + c, gv);
#pragma unroll
    for (int e = 0; e < V; ++e) o[e] = pv[e] * (gv[e] - dot[0]);
    detail::store_f32<T, V>(ds + off + c, o);
  }
}

}  // namespace

template <class T>
void attn_softmax(const T* s, T* p, const cpu::AttnShape& a, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads * a.seq_q;
  if (rows <= 0 || a.seq_kv <= 0) return;
  constexpr int vec = detail::vec_of<T>;
  if (a.seq_kv % vec == 0 && detail::aligned(16, s, p))
    softmax_kernel<T, vec><<<static_cast<unsigned>(rows), detail::row_threads_ilp(a.seq_kv / vec), 0, stream>>>(
        s, p, a.seq_q, a.seq_kv, a.causal);
  else
    softmax_kernel<T, 1><<<static_cast<unsigned>(rows), detail::row_threads_ilp(a.seq_kv), 0, stream>>>(
        s, p, a.seq_q, a.seq_kv, a.causal);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void attn_softmax_bwd(const T* p, const T* dp, T* ds, const cpu::AttnShape& a, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads * a.seq_q;
  if (rows <= 0 || a.seq_kv <= 0) return;
  constexpr int vec = detail::vec_of<T>;
  if (a.seq_kv % vec == 0 && detail::aligned(16, p, dp, ds))
    softmax_bwd_kernel<T, vec><<<static_cast<unsigned>(rows), detail::row_threads(a.seq_kv / vec), 0,
                                 stream>>>(p, dp, ds, a.seq_kv);
  else
    softmax_bwd_kernel<T, 1><<<static_cast<unsigned>(rows), detail::row_threads(a.seq_kv), 0, stream>>>(
        p, dp, ds, a.seq_kv);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

#define PERFSIM_CUDA_INSTANTIATE_ATTN_SOFTMAX(T)                                                 \
  template void attn_softmax<T>(const T*, T*, const cpu::AttnShape&, cudaStream_t);             \
  template void attn_softmax_bwd<T>(const T*, const T*, T*, const cpu::AttnShape&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_ATTN_SOFTMAX(float)
PERFSIM_CUDA_INSTANTIATE_ATTN_SOFTMAX(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_ATTN_SOFTMAX(__half)

}  // namespace perfsim::cuda
