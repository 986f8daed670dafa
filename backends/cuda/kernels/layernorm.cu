// LayerNorm (Ba et al. 2016) over rows of x [rows, cols]: y = (x − mean)·rstd·gamma + beta with
// two-pass statistics (mean, then variance) for accuracy; its backward (dx, and dgamma/dbeta
// via per-block partials); and the fused residual add + LayerNorm. One block per row. Aligned
// backward rows take the pipelined kernel (norm_bwd_pipelined.cu); for the others, the
// backward's blocks are persistent (as many as fit on the device), each walking a fixed range
// of rows held in registers (row_regs.cuh) with the next row's loads in flight, and keep their
// dgamma/dbeta partials in registers: one global write per column per block. Rows too wide for
// one block's registers take the two-sweep kernel.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norm_bwd_rows.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

namespace perfsim::cuda {

using detail::load_f32;
using detail::dispatch_vec;
using detail::store_f32;

namespace {

// Mean and rstd of row `xr` (two sweeps; the second hits L1/L2).
template <class T, int V>
__device__ void row_stats(const T* xr, int64_t cols, float eps, float& mean, float& rstd) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float s[1] = {0.0f};
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    load_f32<T, V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) s[0] += v[i];
  }
  detail::block_sum(s);
  mean = s[0] / static_cast<float>(cols);
  float q[1] = {0.0f};
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    load_f32<T, V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) q[0] += (v[i] - mean) * (v[i] - mean);
  }
  detail::block_sum(q);
  rstd = 1.0f / sqrtf(q[0] / static_cast<float>(cols) + eps);
}

template <class T, int V>
__device__ void write_normalized(const T* xr, const T* gamma, const T* beta, T* yr, int64_t cols,
                                 float mean, float rstd) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V], b[V], o[V];
    load_f32<T, V>(xr + c, v);
    load_f32<T, V>(gamma + c, g);
    load_f32<T, V>(beta + c, b);
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = (v[i] - mean) * rstd * g[i] + b[i];
    store_f32<T, V>(yr + c, o);
  }
}

template <class T, int V>
__global__ void layernorm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                 const T* __restrict__ beta, T* __restrict__ y, int64_t cols,
                                 float eps) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  float mean, rstd;
  row_stats<T, V>(x + off, cols, eps, mean, rstd);
  write_normalized<T, V>(x + off, gamma, beta, y + off, cols, mean, rstd);
}

template <class T, int V>
__global__ void add_layernorm_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                     const T* __restrict__ gamma, const T* __restrict__ beta,
                                     T* __restrict__ sum, T* __restrict__ y, int64_t cols,
                                     float eps) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float va[V], vb[V], s[V];
    load_f32<T, V>(a + off + c, va);
    load_f32<T, V>(b + off + c, vb);
#pragma unroll
    for (int i = 0; i < V; ++i) s[i] = va[i] + vb[i];
    store_f32<T, V>(sum + off + c, s);
  }
  // Other threads' stores to `sum` must be visible before the statistics sweep reads them.
  __syncthreads();
  float mean, rstd;
  row_stats<T, V>(sum + off, cols, eps, mean, rstd);
  write_normalized<T, V>(sum + off, gamma, beta, y + off, cols, mean, rstd);
}

// Block p owns rows [p·rows/P, (p+1)·rows/P); partials: dgamma rows [0, P), dbeta [P, 2P).
template <class T, int V>
__global__ void layernorm_bwd_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                     const T* __restrict__ dy, T* __restrict__ dx,
                                     float* __restrict__ partial, int64_t rows, int64_t cols,
                                     float eps) {
  const int64_t parts = gridDim.x, p = blockIdx.x;
  const int64_t r0 = p * rows / parts, r1 = (p + 1) * rows / parts;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float* pg = partial + p * cols;
  float* pb = partial + (parts + p) * cols;
  for (int64_t c = threadIdx.x * V; c < cols; c += step)
#pragma unroll
    for (int i = 0; i < V; ++i) pg[c + i] = pb[c + i] = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t off = r * cols;
    float s[1] = {0.0f};
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float xv[V];
      load_f32<T, V>(x + off + c, xv);
#pragma unroll
      for (int i = 0; i < V; ++i) s[0] += xv[i];
    }
    detail::block_sum(s);
    const float mean = s[0] / static_cast<float>(cols);
    float acc[3] = {0.0f, 0.0f, 0.0f};  // Σ (x−mean)², Σ g, Σ g·(x−mean); g = dy ⊙ gamma
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float xv[V], gv[V], dv[V];
      load_f32<T, V>(x + off + c, xv);
      load_f32<T, V>(gamma + c, gv);
      load_f32<T, V>(dy + off + c, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xc = xv[i] - mean, g = dv[i] * gv[i];
        acc[0] += xc * xc;
        acc[1] += g;
        acc[2] += g * xc;
      }
    }
    detail::block_sum(acc);
    const float inv_cols = 1.0f / static_cast<float>(cols);
    const float rstd = 1.0f / sqrtf(acc[0] * inv_cols + eps);
    const float mg = acc[1] * inv_cols, mgx = acc[2] * rstd * inv_cols;
    // dx = rstd · (g − mean(g) − x̂·mean(g ⊙ x̂))
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float xv[V], gv[V], dv[V], o[V];
      load_f32<T, V>(x + off + c, xv);
      load_f32<T, V>(gamma + c, gv);
      load_f32<T, V>(dy + off + c, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xh = (xv[i] - mean) * rstd;
        o[i] = rstd * (dv[i] * gv[i] - mg - xh * mgx);
        pg[c + i] += dv[i] * xh;
        pb[c + i] += dv[i];
      }
      store_f32<T, V>(dx + off + c, o);
    }
  }
}

// Block p owns rows [p·rows/P, (p+1)·rows/P); partials: dgamma rows [0, P), dbeta [P, 2P).
template <class T, int V, int N>
__global__ void __launch_bounds__(detail::bwd_max_threads) layernorm_bwd_reg_kernel(
    const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ dy,
    T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t cols, float eps) {
  const int64_t parts = gridDim.x, p = blockIdx.x;
  const int64_t r0 = p * rows / parts, r1 = (p + 1) * rows / parts;
  const int tid = threadIdx.x, nt = blockDim.x;
  using Slice = detail::RowSlice<T, V, N>;
  float g[N][V], pg[N][V], pb[N][V];
  {
    Slice gs;
    gs.load(gamma, cols, tid, nt);
#pragma unroll
    for (int k = 0; k < N; ++k)
#pragma unroll
      for (int i = 0; i < V; ++i) g[k][i] = gs.at(k, i), pg[k][i] = pb[k][i] = 0.0f;
  }
  Slice nx, nd;
  if (r0 < r1) {
    nx.load(x + r0 * cols, cols, tid, nt);
    nd.load(dy + r0 * cols, cols, tid, nt);
  }
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = r0; r < r1; ++r) {
    const Slice xs = nx, ds = nd;
    if (r + 1 < r1) {
      nx.load(x + (r + 1) * cols, cols, tid, nt);
      nd.load(dy + (r + 1) * cols, cols, tid, nt);
    }
    // One reduction for all statistics, shifted by the row's first element (any sample of the
    // row keeps the one-pass variance free of cancellation when |mean| ≫ std).
    const float shift = detail::to_f32(x[r * cols]);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // Σ x−K, Σ (x−K)², Σ g, Σ g·(x−K); g = dy ⊙ gamma
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!Slice::in_row(tid, nt, k, cols)) continue;  // zero-filled x would count −K
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xk = xs.at(k, i) - shift, gv = ds.at(k, i) * g[k][i];
        acc[0] += xk;
        acc[1] += xk * xk;
        acc[2] += gv;
        acc[3] += gv * xk;
      }
    }
    detail::block_sum(acc);
    const float mk = acc[0] * inv_cols;  // mean − K
    const float mean = shift + mk;
    const float var = fmaxf(acc[1] * inv_cols - mk * mk, 0.0f);
    const float rstd = 1.0f / sqrtf(var + eps);
    // Σ g·(x−mean) = Σ g·(x−K) − (mean−K)·Σ g
    const float mg = acc[2] * inv_cols, mgx = (acc[3] - mk * acc[2]) * rstd * inv_cols;
    // dx = rstd · (g − mean(g) − x̂·mean(g ⊙ x̂))
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!Slice::in_row(tid, nt, k, cols)) continue;
      float o[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xh = (xs.at(k, i) - mean) * rstd, dv = ds.at(k, i);
        o[i] = rstd * (dv * g[k][i] - mg - xh * mgx);
        pg[k][i] += dv * xh;
        pb[k][i] += dv;
      }
      store_f32<T, V>(dx + r * cols + Slice::col(tid, nt, k, 0), o);
    }
  }
  Slice::store(partial + p * cols, pg, tid, nt, cols);
  Slice::store(partial + (parts + p) * cols, pb, tid, nt, cols);
}

// The backward's row kernels, for detail::norm_bwd_rows.
struct LayernormBwdKernels {
  template <class T, int V, int N> static auto reg() { return layernorm_bwd_reg_kernel<T, V, N>; }
  template <class T, int V> static auto plain() { return layernorm_bwd_kernel<T, V>; }
};

}  // namespace

template <class T>
void layernorm(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t cols,
               float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool v = cols % detail::vec_of<T> == 0 && detail::aligned(16, x, gamma, beta, y);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    layernorm_kernel<T, V><<<static_cast<unsigned>(rows), detail::row_threads(cols / V), 0,
                             stream>>>(x, gamma, beta, y, cols, eps);
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void add_layernorm(const T* a, const T* b, const T* gamma, const T* beta, T* sum, T* y,
                   int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool v = cols % detail::vec_of<T> == 0 && detail::aligned(16, a, b, gamma, beta, sum, y);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    add_layernorm_kernel<T, V><<<static_cast<unsigned>(rows), detail::row_threads(cols / V), 0,
                                 stream>>>(a, b, gamma, beta, sum, y, cols, eps);
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void layernorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma, T* dbeta,
                   int64_t rows, int64_t cols, float eps, float* workspace, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  int64_t parts = detail::norm_bwd_pipelined(true, x, gamma, dy, dx, workspace, rows, cols, eps, stream);
  if (parts == 0)
    parts = detail::norm_bwd_rows<LayernormBwdKernels>(x, gamma, dy, dx, workspace, rows, cols, eps, stream);
  detail::sum_partials(workspace, dgamma, parts, cols, stream, dbeta);
}

#define PERFSIM_CUDA_INSTANTIATE_LAYERNORM(T)                                                  \
  template void layernorm<T>(const T*, const T*, const T*, T*, int64_t, int64_t, float,        \
                             cudaStream_t);                                                    \
  template void add_layernorm<T>(const T*, const T*, const T*, const T*, T*, T*, int64_t,      \
                                 int64_t, float, cudaStream_t);                                \
  template void layernorm_bwd<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,   \
                                 float, float*, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_LAYERNORM(float)
PERFSIM_CUDA_INSTANTIATE_LAYERNORM(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_LAYERNORM(__half)

}  // namespace perfsim::cuda
