// Row softmax of materialized attention scores with the causal mask, and its backward.
// S, P, dP, dS [b, h, sq, skv]; row r = ((b·h + head)·sq + i) sees kv positions
// j < visible(i) (all of them when not causal); masked entries of P are written as 0.
// Forward: the row is held in registers (row_regs.cuh) and read from DRAM once: max, Σexp
// (exponentials kept in registers), then the write. Rows up to 256 packs take one warp each
// (4 rows per block, shuffles only, ⌈packs / 32⌉ packs a lane); longer rows up to 4096 packs
// one block each. Wider rows fall back to two sweeps with an
// online (max, Σexp) pair per thread (Milakov & Gimelshein 2018). The backward's
// dS = P ⊙ (dP − Σ dP⊙P) is a reduction sweep then a write sweep.
#include <type_traits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_materialized.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

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

constexpr int k_warp_rows = 4;   // rows (warps) per block of the warp kernel
constexpr int k_block_packs = 4;  // packs per thread of the block kernel (no spills at 1024)

template <bool Block> __device__ __forceinline__ float row_max(float v) {
  if constexpr (Block) return detail::block_max(v);
  else return detail::warp_max(v);
}
template <bool Block> __device__ __forceinline__ float row_sum(float v) {
  if constexpr (Block) {
    float a[1] = {v};
    detail::block_sum(a);
    return a[0];
  } else {
    return detail::warp_sum(v);
  }
}

// Softmax of one row held by `nt` threads (a warp or the block), N packs each. Each element
// costs about six instructions: the row is memory-bound only if the exponentials stay cheap
// (with two accurate expf per element it issued ~35 instructions per element and fell to 80%
// of a copy). So: masked elements become −inf once (2^−inf = 0: no mask later), the
// exponential is 2^(x·log2e − max·log2e), one FFMA and one MUFU.EX2, computed once and kept
// in registers for the write.
template <class T, int V, int N, bool Block>
__device__ __forceinline__ void softmax_row(const T* __restrict__ sr, T* __restrict__ pr,
                                            int64_t skv, int64_t vis, int tid, int nt) {
  using Slice = detail::RowSlice<T, V, N>;
  float e[N][V];
  {
    Slice xs;
    xs.load(sr, vis, tid, nt);  // masked packs are not read
    if (Slice::col(tid, nt, N - 1, V - 1) < vis) {  // all this thread holds is visible
#pragma unroll
      for (int k = 0; k < N; ++k)
#pragma unroll
        for (int i = 0; i < V; ++i) e[k][i] = xs.at(k, i);
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k)
#pragma unroll
        for (int i = 0; i < V; ++i) e[k][i] = Slice::col(tid, nt, k, i) < vis ? xs.at(k, i) : -INFINITY;
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < N; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) m = fmaxf(m, e[k][i]);
  const float mx = row_max<Block>(m);
  const float mx2 = mx == -INFINITY ? 0.0f : mx * detail::k_log2e;  // fully masked row: all 0
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < N; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) {
      e[k][i] = detail::exp2_approx(fmaf(e[k][i], detail::k_log2e, -mx2));
      s += e[k][i];
    }
  const float tot = row_sum<Block>(s);
  const float inv = tot > 0.0f ? 1.0f / tot : 0.0f;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (!Slice::in_row(tid, nt, k, skv)) continue;
    float o[V];
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = e[k][i] * inv;
    detail::store_f32<T, V>(pr + Slice::col(tid, nt, k, 0), o);
  }
}

__device__ __forceinline__ int64_t visible(int64_t row, int64_t sq, int64_t skv, bool causal) {
  const int64_t vis = causal ? skv - sq + row % sq + 1 : skv;
  return vis < skv ? (vis < 0 ? 0 : vis) : skv;
}

template <class T, int V, int N>
__global__ void __launch_bounds__(k_warp_rows * 32) softmax_warp_kernel(
    const T* __restrict__ s, T* __restrict__ p, int64_t rows, int64_t sq, int64_t skv, bool causal) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * k_warp_rows + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave; no block barrier follows
  softmax_row<T, V, N, false>(s + row * skv, p + row * skv, skv, visible(row, sq, skv, causal),
                              threadIdx.x % 32, 32);
}

template <class T, int V, int N>
__global__ void __launch_bounds__(1024) softmax_block_kernel(const T* __restrict__ s,
                                                             T* __restrict__ p, int64_t sq,
                                                             int64_t skv, bool causal) {
  const int64_t row = blockIdx.x;
  softmax_row<T, V, N, true>(s + row * skv, p + row * skv, skv, visible(row, sq, skv, causal),
                             threadIdx.x, blockDim.x);
}

template <class T, int V>
void launch_softmax(const T* s, T* p, int64_t rows, const ops::AttnShape& a, cudaStream_t stream) {
  const int64_t units = (a.seq_kv + V - 1) / V;
  const auto warp_blocks = static_cast<unsigned>((rows + k_warp_rows - 1) / k_warp_rows);
  const int warp_threads = k_warp_rows * 32;
  // A warp holds ⌈units / 32⌉ packs a lane: every slot it exponentiates is one of the row's
  // (rounding up to a power of two left up to 60% of them empty, e.g. 160 packs in 256).
  auto warp = [&](auto packs) {
    softmax_warp_kernel<T, V, decltype(packs)::value><<<warp_blocks, warp_threads, 0, stream>>>(
        s, p, rows, a.seq_q, a.seq_kv, a.causal);
  };
  if (units <= 256) {
    switch ((units + 31) / 32) {
      case 0:
      case 1: warp(std::integral_constant<int, 1>{}); break;
      case 2: warp(std::integral_constant<int, 2>{}); break;
      case 3: warp(std::integral_constant<int, 3>{}); break;
      case 4: warp(std::integral_constant<int, 4>{}); break;
      case 5: warp(std::integral_constant<int, 5>{}); break;
      case 6: warp(std::integral_constant<int, 6>{}); break;
      case 7: warp(std::integral_constant<int, 7>{}); break;
      default: warp(std::integral_constant<int, 8>{}); break;
    }
  } else if (const int t = detail::reg_row_threads(units, k_block_packs); t > 0)
    softmax_block_kernel<T, V, k_block_packs><<<static_cast<unsigned>(rows), t, 0, stream>>>(
        s, p, a.seq_q, a.seq_kv, a.causal);
  else
    softmax_kernel<T, V><<<static_cast<unsigned>(rows), detail::row_threads_ilp(units), 0, stream>>>(
        s, p, a.seq_q, a.seq_kv, a.causal);
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
void attn_softmax(const T* s, T* p, const ops::AttnShape& a, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads * a.seq_q;
  if (rows <= 0 || a.seq_kv <= 0) return;
  constexpr int vec = detail::vec_of<T>;
  if (a.seq_kv % vec == 0 && detail::aligned(16, s, p)) launch_softmax<T, vec>(s, p, rows, a, stream);
  else launch_softmax<T, 1>(s, p, rows, a, stream);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void attn_softmax_bwd(const T* p, const T* dp, T* ds, const ops::AttnShape& a, cudaStream_t stream) {
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
  template void attn_softmax<T>(const T*, T*, const ops::AttnShape&, cudaStream_t);             \
  template void attn_softmax_bwd<T>(const T*, const T*, T*, const ops::AttnShape&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_ATTN_SOFTMAX(float)
PERFSIM_CUDA_INSTANTIATE_ATTN_SOFTMAX(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_ATTN_SOFTMAX(__half)

}  // namespace perfsim::cuda
