// RMSNorm (Zhang & Sennrich 2019) over rows of x [rows, cols]: y = x · rstd · gamma with
// rstd = 1/sqrt(mean(x²) + eps); its backward (dx, and dgamma via per-block partials); and
// the fused residual add + RMSNorm (sum = a + b stored, then normalized as stored). One block
// per row. rmsnorm and rmsnorm_bwd hold rows in registers (row_regs.cuh: one DRAM read, no
// second sweep). Aligned backward rows take the pipelined kernel (norm_bwd_pipelined.cu);
// unaligned ones the persistent kernel below (as many blocks as fit on the device), each
// walking a fixed range of rows with the next row's loads in flight, and keep their dgamma
// partial in registers: one global write per column per block. Rows too wide for one block's
// registers take the two-sweep kernels.
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

template <class T, int V>
__global__ void rmsnorm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                               T* __restrict__ y, int64_t cols, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float ss[1] = {0.0f};
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    load_f32<T, V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) ss[0] += v[i] * v[i];
  }
  detail::block_sum(ss);
  const float rstd = 1.0f / sqrtf(ss[0] / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V], o[V];
    load_f32<T, V>(xr + c, v);
    load_f32<T, V>(gamma + c, g);
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = v[i] * rstd * g[i];
    store_f32<T, V>(yr + c, o);
  }
}

template <class T, int V>
__global__ void add_rmsnorm_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                   const T* __restrict__ gamma, T* __restrict__ sum,
                                   T* __restrict__ y, int64_t cols, float eps) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float ss[1] = {0.0f};
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float va[V], vb[V], s[V];
    load_f32<T, V>(a + off + c, va);
    load_f32<T, V>(b + off + c, vb);
#pragma unroll
    for (int i = 0; i < V; ++i) s[i] = detail::to_f32(detail::from_f32<T>(va[i] + vb[i]));
    store_f32<T, V>(sum + off + c, s);
#pragma unroll
    for (int i = 0; i < V; ++i) ss[0] += s[i] * s[i];
  }
  detail::block_sum(ss);
  const float rstd = 1.0f / sqrtf(ss[0] / static_cast<float>(cols) + eps);
  // Each thread re-reads only the elements it stored itself: no barrier needed.
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float s[V], g[V], o[V];
    load_f32<T, V>(sum + off + c, s);
    load_f32<T, V>(gamma + c, g);
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = s[i] * rstd * g[i];
    store_f32<T, V>(y + off + c, o);
  }
}

// Block p owns rows [p·rows/P, (p+1)·rows/P) and the partial row `partial + p·cols`.
template <class T, int V>
__global__ void rmsnorm_bwd_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                   const T* __restrict__ dy, T* __restrict__ dx,
                                   float* __restrict__ partial, int64_t rows, int64_t cols,
                                   float eps) {
  const int64_t parts = gridDim.x, p = blockIdx.x;
  const int64_t r0 = p * rows / parts, r1 = (p + 1) * rows / parts;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float* pg = partial + p * cols;
  for (int64_t c = threadIdx.x * V; c < cols; c += step)
#pragma unroll
    for (int i = 0; i < V; ++i) pg[c + i] = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t off = r * cols;
    float acc[2] = {0.0f, 0.0f};  // Σ x², Σ dy·gamma·x
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float xv[V], gv[V], dv[V];
      load_f32<T, V>(x + off + c, xv);
      load_f32<T, V>(gamma + c, gv);
      load_f32<T, V>(dy + off + c, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        acc[0] += xv[i] * xv[i];
        acc[1] += dv[i] * gv[i] * xv[i];
      }
    }
    detail::block_sum(acc);
    const float rstd = 1.0f / sqrtf(acc[0] / static_cast<float>(cols) + eps);
    const float mgx = acc[1] * rstd / static_cast<float>(cols);
    // dx = rstd · (g − x̂·mean(g ⊙ x̂)), g = dy ⊙ gamma
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float xv[V], gv[V], dv[V], o[V];
      load_f32<T, V>(x + off + c, xv);
      load_f32<T, V>(gamma + c, gv);
      load_f32<T, V>(dy + off + c, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xh = xv[i] * rstd;
        o[i] = rstd * (dv[i] * gv[i] - xh * mgx);
        pg[c + i] += dv[i] * xh;
      }
      store_f32<T, V>(dx + off + c, o);
    }
  }
}

using detail::bwd_max_threads;
using detail::bwd_packs;
using detail::fwd_packs;

template <class T, int V, int N>
__global__ void __launch_bounds__(1024) rmsnorm_reg_kernel(const T* __restrict__ x,
                                                           const T* __restrict__ gamma,
                                                           T* __restrict__ y, int64_t cols,
                                                           float eps) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const int tid = threadIdx.x, nt = blockDim.x;
  detail::RowSlice<T, V, N> xs;
  xs.load(x + off, cols, tid, nt);
  float ss[1] = {0.0f};
#pragma unroll
  for (int k = 0; k < N; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) ss[0] += xs.at(k, i) * xs.at(k, i);
  detail::block_sum(ss);
  const float rstd = 1.0f / sqrtf(ss[0] / static_cast<float>(cols) + eps);
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

// Persistent backward: block p owns rows [p·rows/P, (p+1)·rows/P); gamma and the dgamma
// partial stay in registers; row r+1 is loaded while row r is reduced.
template <class T, int V, int N>
__global__ void __launch_bounds__(bwd_max_threads) rmsnorm_bwd_reg_kernel(
    const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ dy,
    T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t cols, float eps) {
  const int64_t parts = gridDim.x, p = blockIdx.x;
  const int64_t r0 = p * rows / parts, r1 = (p + 1) * rows / parts;
  const int tid = threadIdx.x, nt = blockDim.x;
  using Slice = detail::RowSlice<T, V, N>;
  float g[N][V], pg[N][V];
  {
    Slice gs;
    gs.load(gamma, cols, tid, nt);
#pragma unroll
    for (int k = 0; k < N; ++k)
#pragma unroll
      for (int i = 0; i < V; ++i) g[k][i] = gs.at(k, i), pg[k][i] = 0.0f;
  }
  Slice nx, nd;
  if (r0 < r1) {
    nx.load(x + r0 * cols, cols, tid, nt);
    nd.load(dy + r0 * cols, cols, tid, nt);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const Slice xs = nx, ds = nd;
    if (r + 1 < r1) {
      nx.load(x + (r + 1) * cols, cols, tid, nt);
      nd.load(dy + (r + 1) * cols, cols, tid, nt);
    }
    float acc[2] = {0.0f, 0.0f};  // Σ x², Σ dy·gamma·x
#pragma unroll
    for (int k = 0; k < N; ++k)
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xv = xs.at(k, i);
        acc[0] += xv * xv;
        acc[1] += ds.at(k, i) * g[k][i] * xv;
      }
    detail::block_sum(acc);
    const float rstd = 1.0f / sqrtf(acc[0] / static_cast<float>(cols) + eps);
    const float mgx = acc[1] * rstd / static_cast<float>(cols);
    // dx = rstd · (g − x̂·mean(g ⊙ x̂)), g = dy ⊙ gamma
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!Slice::in_row(tid, nt, k, cols)) continue;
      float o[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float xh = xs.at(k, i) * rstd, dv = ds.at(k, i);
        o[i] = rstd * (dv * g[k][i] - xh * mgx);
        pg[k][i] += dv * xh;
      }
      store_f32<T, V>(dx + r * cols + Slice::col(tid, nt, k, 0), o);
    }
  }
  Slice::store(partial + p * cols, pg, tid, nt, cols);
}

// The backward's row kernels, for detail::norm_bwd_rows.
struct RmsnormBwdKernels {
  template <class T, int V, int N> static auto reg() { return rmsnorm_bwd_reg_kernel<T, V, N>; }
  template <class T, int V> static auto plain() { return rmsnorm_bwd_kernel<T, V>; }
};

}  // namespace

template <class T>
void rmsnorm(const T* x, const T* gamma, T* y, int64_t rows, int64_t cols, float eps,
             cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  constexpr int vec = detail::vec_of<T>;
  const bool v = cols % vec == 0 && detail::aligned(16, x, gamma, y);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    constexpr int N = fwd_packs<V>;
    if (const int t = detail::reg_row_threads(cols / V, N); t > 0)
      rmsnorm_reg_kernel<T, V, N><<<static_cast<unsigned>(rows), t, 0, stream>>>(x, gamma, y, cols, eps);
    else
      rmsnorm_kernel<T, V><<<static_cast<unsigned>(rows), detail::row_threads(cols / V), 0, stream>>>(
          x, gamma, y, cols, eps);
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void add_rmsnorm(const T* a, const T* b, const T* gamma, T* sum, T* y, int64_t rows, int64_t cols,
                 float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  constexpr int vec = detail::vec_of<T>;
  const bool v = cols % vec == 0 && detail::aligned(16, a, b, gamma, sum, y);
  dispatch_vec<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    add_rmsnorm_kernel<T, V><<<static_cast<unsigned>(rows), detail::row_threads(cols / V), 0,
                               stream>>>(a, b, gamma, sum, y, cols, eps);
  });
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void rmsnorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma, int64_t rows,
                 int64_t cols, float eps, float* workspace, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  int64_t parts = detail::norm_bwd_pipelined(false, x, gamma, dy, dx, workspace, rows, cols, eps, stream);
  if (parts == 0)
    parts = detail::norm_bwd_rows<RmsnormBwdKernels>(x, gamma, dy, dx, workspace, rows, cols, eps, stream);
  detail::sum_partials(workspace, dgamma, parts, cols, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_RMSNORM(T)                                                    \
  template void rmsnorm<T>(const T*, const T*, T*, int64_t, int64_t, float, cudaStream_t);     \
  template void add_rmsnorm<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, float,  \
                               cudaStream_t);                                                  \
  template void rmsnorm_bwd<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, float,  \
                               float*, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_RMSNORM(float)
PERFSIM_CUDA_INSTANTIATE_RMSNORM(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_RMSNORM(__half)

}  // namespace perfsim::cuda
