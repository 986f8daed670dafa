// The norm forward for a policy P (norm_common.cuh): y = centre(x)·rstd·gamma (+ beta) over the
// rows of x [rows, cols], one block per row, and the fused residual add + norm (sum = a + b
// stored, then normalized as stored). Rows are swept from memory: the statistics first (two
// sweeps when centered, mean then variance, for accuracy; the later ones hit L1/L2), then the
// output. A policy with fwd_holds_row reads a row that fits one block's registers once
// (row_regs.cuh) and takes the sweeping kernel only for wider rows.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norm_common.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

namespace perfsim::cuda::detail {

struct RowStats {
  float mean, rstd;  // mean 0 when uncentered
};

// Statistics of row `xr`: the mean (centered only), then Σ (x − mean)² in a second sweep.
template <class P, class T, int V>
__device__ RowStats row_stats(const T* xr, int64_t cols, float eps) {
  float mean = 0.0f;
  if constexpr (P::centered) mean = row_mean<T, V>(xr, cols);
  const float q = row_sum<T, V>(xr, cols, [mean](float x) {
    const float d = centre<P>(x, mean);
    return d * d;
  });
  return {mean, rstd_of(q, cols, eps)};
}

template <class P, class T, int V>
__device__ void write_normalized(const T* xr, const T* gamma, const T* beta, T* yr, int64_t cols,
                                 RowStats st) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V], b[V], o[V];
    load_f32<T, V>(xr + c, v);
    load_f32<T, V>(gamma + c, g);
    if constexpr (P::has_bias) load_f32<T, V>(beta + c, b);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      o[i] = centre<P>(v[i], st.mean) * st.rstd * g[i];
      if constexpr (P::has_bias) o[i] += b[i];
    }
    store_f32<T, V>(yr + c, o);
  }
}

template <class P, class T, int V>
__global__ void norm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                            const T* __restrict__ beta, T* __restrict__ y, int64_t cols,
                            float eps) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const RowStats st = row_stats<P, T, V>(x + off, cols, eps);
  write_normalized<P, T, V>(x + off, gamma, beta, y + off, cols, st);
}

// The row held as N packs per thread: one DRAM read. Packs past the row end are zeros, which
// add nothing to Σ x² but would to Σ (x − mean)², hence uncentered policies only.
template <class P, class T, int V, int N>
__global__ void __launch_bounds__(1024) norm_held_kernel(const T* __restrict__ x,
                                                         const T* __restrict__ gamma,
                                                         T* __restrict__ y, int64_t cols,
                                                         float eps) {
  static_assert(!P::centered && !P::has_bias, "the held-row forward has no mean and no bias");
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const int tid = threadIdx.x, nt = blockDim.x;
  RowSlice<T, V, N> xs;
  xs.load(x + off, cols, tid, nt);
  float ss[1] = {0.0f};
#pragma unroll
  for (int k = 0; k < N; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) ss[0] += xs.at(k, i) * xs.at(k, i);
  block_sum(ss);
  const float rstd = rstd_of(ss[0], cols, eps);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (!xs.in_row(tid, nt, k, cols)) continue;
    const int64_t c = xs.col(tid, nt, k, 0);
    float g[V], o[V];
    load_f32<T, V>(gamma + c, g);
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = xs.at(k, i) * rstd * g[i];
    store_f32<T, V>(y + off + c, o);
  }
}

// An uncentered norm knows its centre before the sum is stored, so it accumulates Σ sum² while
// storing (from the rounded values it stores) and re-reads only the elements each thread stored
// itself: no barrier. A centered one reads the stored sum back for its two statistics sweeps.
template <class P, class T, int V>
__global__ void add_norm_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                const T* __restrict__ gamma, const T* __restrict__ beta,
                                T* __restrict__ sum, T* __restrict__ y, int64_t cols, float eps) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float ss[1] = {0.0f};
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float va[V], vb[V], s[V];
    load_f32<T, V>(a + off + c, va);
    load_f32<T, V>(b + off + c, vb);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      s[i] = va[i] + vb[i];
      if constexpr (!P::centered) s[i] = to_f32(from_f32<T>(s[i]));
    }
    store_f32<T, V>(sum + off + c, s);
    if constexpr (!P::centered) {
#pragma unroll
      for (int i = 0; i < V; ++i) ss[0] += s[i] * s[i];
    }
  }
  RowStats st;
  if constexpr (P::centered) {
    // Other threads' stores to `sum` must be visible before the statistics sweep reads them.
    __syncthreads();
    st = row_stats<P, T, V>(sum + off, cols, eps);
  } else {
    block_sum(ss);
    st = {0.0f, rstd_of(ss[0], cols, eps)};
  }
  write_normalized<P, T, V>(sum + off, gamma, beta, y + off, cols, st);
}

// y = norm(x); beta is unused (may be null) without has_bias.
template <class P, class T>
void norm_fwd(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t cols,
              float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool v = cols % vec_of<T> == 0 && aligned(16, x, gamma, beta, y);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    if constexpr (P::fwd_holds_row) {
      constexpr int N = fwd_packs<V>;
      if (const int t = reg_row_threads(cols / V, N); t > 0) {
        norm_held_kernel<P, T, V, N><<<static_cast<unsigned>(rows), t, 0, stream>>>(x, gamma, y,
                                                                                     cols, eps);
        return;
      }
    }
    norm_kernel<P, T, V><<<static_cast<unsigned>(rows), row_threads(cols / V), 0, stream>>>(
        x, gamma, beta, y, cols, eps);
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
}

// sum = a + b, y = norm(sum); beta is unused (may be null) without has_bias.
template <class P, class T>
void add_norm(const T* a, const T* b, const T* gamma, const T* beta, T* sum, T* y, int64_t rows,
              int64_t cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool v = cols % vec_of<T> == 0 && aligned(16, a, b, gamma, beta, sum, y);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    add_norm_kernel<P, T, V><<<static_cast<unsigned>(rows), row_threads(cols / V), 0, stream>>>(
        a, b, gamma, beta, sum, y, cols, eps);
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace perfsim::cuda::detail
