// The norm backward for a policy P (norm_common.cuh): dx [rows, cols], and dgamma (dbeta with
// has_bias) through per-block partial rows summed by detail::sum_partials. Aligned rows take
// the pipelined kernel (norm_bwd_pipelined.cu). For the others the blocks are persistent (as
// many as fit on the device), each walking a fixed range of rows held in registers
// (row_regs.cuh) with the next row's loads in flight, and keep their partials in registers:
// one global write per column per block. Rows too wide for one block's registers take the
// sweeping kernel (one block per partial row).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norm_common.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

namespace perfsim::cuda::detail {

// What dx needs of a row: x̂ = (x − mean)·rstd and dx = rstd·(g − mg − x̂·mgx), with
// g = dy ⊙ gamma, mg = mean(g) and mgx = mean(g ⊙ x̂). Uncentered norms have no mean and no
// mg term (their x̂ = x·rstd, dx = rstd·(g − x̂·mgx)).
struct RowTerms {
  float mean, rstd, mg, mgx;
};

template <class P>
__device__ __forceinline__ float normalized(const RowTerms& t, float x) {
  return centre<P>(x, t.mean) * t.rstd;
}

template <class P>
__device__ __forceinline__ float dx_of(const RowTerms& t, float g, float xh) {
  if constexpr (P::centered) return t.rstd * (g - t.mg - xh * t.mgx);
  else return t.rstd * (g - xh * t.mgx);
}

// Block p owns rows [p·rows/P, (p+1)·rows/P); partials: dgamma rows [0, P), dbeta [P, 2P).
// Each row is swept for its statistics (after a sweep for the mean when centered) and then
// for dx.
template <class P, class T, int V>
__global__ void norm_bwd_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                const T* __restrict__ dy, T* __restrict__ dx,
                                float* __restrict__ partial, int64_t rows, int64_t cols,
                                float eps) {
  const int64_t parts = gridDim.x, p = blockIdx.x;
  const int64_t r0 = p * rows / parts, r1 = (p + 1) * rows / parts;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float* pg = partial + p * cols;
  float* pb = partial + (parts + p) * cols;  // has_bias only
  for (int64_t c = threadIdx.x * V; c < cols; c += step)
#pragma unroll
    for (int i = 0; i < V; ++i) {
      if constexpr (P::has_bias) pb[c + i] = 0.0f;
      pg[c + i] = 0.0f;
    }
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t off = r * cols;
    float mean = 0.0f;
    if constexpr (P::centered) mean = row_mean<T, V>(x + off, cols);
    float acc[P::bwd_sums] = {};
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float xv[V], gv[V], dv[V];
      load_f32<T, V>(x + off + c, xv);
      load_f32<T, V>(gamma + c, gv);
      load_f32<T, V>(dy + off + c, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) P::bwd_add(acc, centre<P>(xv[i], mean), dv[i], gv[i]);
    }
    block_sum(acc);
    const RowTerms t = P::terms_about_mean(acc, mean, cols, eps);
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float xv[V], gv[V], dv[V], o[V];
      load_f32<T, V>(x + off + c, xv);
      load_f32<T, V>(gamma + c, gv);
      load_f32<T, V>(dy + off + c, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xh = normalized<P>(t, xv[i]);
        o[i] = dx_of<P>(t, dv[i] * gv[i], xh);
        pg[c + i] += dv[i] * xh;
        if constexpr (P::has_bias) pb[c + i] += dv[i];
      }
      store_f32<T, V>(dx + off + c, o);
    }
  }
}

// Persistent: block p owns rows [p·rows/P, (p+1)·rows/P); gamma and the partials stay in
// registers; row r+1 is loaded while row r is reduced. Partials as norm_bwd_kernel's.
template <class P, class T, int V, int N>
__global__ void __launch_bounds__(bwd_max_threads) norm_bwd_held_kernel(
    const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ dy,
    T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t cols, float eps) {
  const int64_t parts = gridDim.x, p = blockIdx.x;
  const int64_t r0 = p * rows / parts, r1 = (p + 1) * rows / parts;
  const int tid = threadIdx.x, nt = blockDim.x;
  using Slice = RowSlice<T, V, N>;
  float g[N][V], pg[N][V], pb[P::has_bias ? N : 1][V];
  {
    Slice gs;
    gs.load(gamma, cols, tid, nt);
#pragma unroll
    for (int k = 0; k < N; ++k)
#pragma unroll
      for (int i = 0; i < V; ++i) {
        g[k][i] = gs.at(k, i), pg[k][i] = 0.0f;
        if constexpr (P::has_bias) pb[k][i] = 0.0f;
      }
  }
  Slice nx, nd;
  if (r0 < r1) {
    nx.load(x + r0 * cols, cols, tid, nt);
    nd.load(dy + r0 * cols, cols, tid, nt);
  }
  constexpr int first = P::centered ? 1 : 0;  // acc[0] = Σ (x − K) when centered
  for (int64_t r = r0; r < r1; ++r) {
    const Slice xs = nx, ds = nd;
    if (r + 1 < r1) {
      nx.load(x + (r + 1) * cols, cols, tid, nt);
      nd.load(dy + (r + 1) * cols, cols, tid, nt);
    }
    // One reduction for all statistics; a centered norm takes them about the row's first
    // element K (any sample of the row keeps the one-pass variance free of cancellation when
    // |mean| ≫ std).
    const float shift = P::centered ? to_f32(x[r * cols]) : 0.0f;
    float acc[first + P::bwd_sums] = {};
#pragma unroll
    for (int k = 0; k < N; ++k) {
      // Zero-filled x past the row end would count −K (about 0 it adds nothing).
      if (P::centered && !Slice::in_row(tid, nt, k, cols)) continue;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float d = centre<P>(xs.at(k, i), shift);
        if constexpr (P::centered) acc[0] += d;
        P::bwd_add(acc + first, d, ds.at(k, i), g[k][i]);
      }
    }
    block_sum(acc);
    const RowTerms t = P::terms_about_shift(acc, shift, cols, eps);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!Slice::in_row(tid, nt, k, cols)) continue;
      float o[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xh = normalized<P>(t, xs.at(k, i)), dv = ds.at(k, i);
        o[i] = dx_of<P>(t, dv * g[k][i], xh);
        pg[k][i] += dv * xh;
        if constexpr (P::has_bias) pb[k][i] += dv;
      }
      store_f32<T, V>(dx + r * cols + Slice::col(tid, nt, k, 0), o);
    }
  }
  Slice::store(partial + p * cols, pg, tid, nt, cols);
  if constexpr (P::has_bias) Slice::store(partial + (parts + p) * cols, pb, tid, nt, cols);
}

// The backward where the pipelined kernel does not apply: the persistent kernel when a row
// fits one block's registers, else the sweeping kernel. Returns the partial rows per
// parameter it wrote to `partials`.
template <class P, class T>
int64_t norm_bwd_rows(const T* x, const T* gamma, const T* dy, T* dx, float* partials, int64_t rows,
                      int64_t cols, float eps, cudaStream_t stream) {
  int64_t parts = norm_bwd_blocks(rows);
  const bool v = cols % vec_of<T> == 0 && aligned(16, x, gamma, dy, dx);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    constexpr int N = bwd_packs<V>;
    if (const int t = reg_row_threads(cols / V, N, bwd_max_threads); t > 0) {
      // As many blocks as are resident at once (never more than the workspace holds).
      const auto kernel = norm_bwd_held_kernel<P, T, V, N>;
      const int64_t resident = int64_t(sm_count()) * blocks_per_sm(kernel, t);
      parts = parts < resident ? parts : resident;
      kernel<<<static_cast<unsigned>(parts), t, 0, stream>>>(x, gamma, dy, dx, partials, rows, cols, eps);
    } else {
      norm_bwd_kernel<P, T, V><<<static_cast<unsigned>(parts), row_threads(cols / V), 0, stream>>>(
          x, gamma, dy, dx, partials, rows, cols, eps);
    }
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
  return parts;
}

// dx, and dgamma (dbeta with has_bias; unused, may be null, without) summed over the rows:
// the row kernels write partial rows to `workspace`, one more kernel sums them.
template <class P, class T>
void norm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma, T* dbeta, int64_t rows,
              int64_t cols, float eps, float* workspace, cudaStream_t stream) {
  // The pipelined kernel knows the two norms as LayerNorm (mean and bias) or RMSNorm (neither).
  static_assert(P::centered == P::has_bias, "a norm with a mean but no bias, or the reverse");
  if (rows <= 0 || cols <= 0) return;
  int64_t parts = norm_bwd_pipelined(P::centered, x, gamma, dy, dx, workspace, rows, cols, eps, stream);
  if (parts == 0) parts = norm_bwd_rows<P>(x, gamma, dy, dx, workspace, rows, cols, eps, stream);
  sum_partials(workspace, dgamma, parts, cols, stream, P::has_bias ? dbeta : nullptr);
}

}  // namespace perfsim::cuda::detail
