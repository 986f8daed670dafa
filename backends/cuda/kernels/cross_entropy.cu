// Fused softmax cross-entropy (as llm.c's fused classifier): one block per row of logits
// [rows, cols], never a probability tensor. Rows up to 4096 packs are held in registers
// (row_regs.cuh) and read from DRAM once: max, Σexp → log-sum-exp, then the mean-loss
// gradient (softmax − onehot)/rows. Wider rows take two sweeps: the first keeps an online
// (max, Σexp) pair per thread (Milakov & Gimelshein 2018) and, for rows up to 110 KiB, a copy
// of the row in shared memory that the second sweep (the gradient) reads instead of memory.
#include <limits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/cross_entropy.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

namespace perfsim::cuda {

namespace {

// Cache: sweep 1 also keeps the row in shared memory (cols·sizeof(T) bytes, dynamic), so
// sweep 2 reads it from there instead of L2/DRAM.
template <class T, int V, bool Cache>
__global__ void cross_entropy_kernel(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                                     float* __restrict__ loss, T* __restrict__ dlogits,
                                     int64_t rows, int64_t cols) {
  extern __shared__ __align__(16) unsigned char row_cache[];
  auto* cache = reinterpret_cast<detail::Pack<T, V>*>(row_cache);
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const T* x = logits + off;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float m = -INFINITY, s = 0.0f;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    if constexpr (Cache) {
      const auto pk = *reinterpret_cast<const detail::Pack<T, V>*>(x + c);
      cache[c / V] = pk;
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = detail::to_f32(pk.v[i]);
    } else {
      detail::load_f32<T, V>(x + c, v);
    }
    float vm = v[0];
#pragma unroll
    for (int i = 1; i < V; ++i) vm = fmaxf(vm, v[i]);
    if (vm > m) {
      s *= expf(m - vm);  // exp(−inf) = 0 on the first chunk
      m = vm;
    }
#pragma unroll
    for (int i = 0; i < V; ++i) s += expf(v[i] - m);
  }
  const float mx = detail::block_max(m);
  float tot[1] = {m == -INFINITY ? 0.0f : s * expf(m - mx)};
  detail::block_sum(tot);
  const float lse = mx + logf(tot[0]);
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < cols;
  if (threadIdx.x == 0)
    loss[blockIdx.x] = valid ? lse - detail::to_f32(x[target]) : std::numeric_limits<float>::quiet_NaN();
  if (dlogits == nullptr) return;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V];
    if constexpr (Cache) {  // written by this thread in sweep 1: no barrier needed
      const auto pk = cache[c / V];
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = detail::to_f32(pk.v[i]);
    } else {
      detail::load_f32<T, V>(x + c, v);
    }
#pragma unroll
    for (int i = 0; i < V; ++i)
      g[i] = (expf(v[i] - lse) - (c + i == target ? 1.0f : 0.0f)) * inv_rows;
    detail::store_f32<T, V>(dlogits + off + c, g);
  }
}

constexpr int k_packs = 8;            // packs per thread of the register kernel
constexpr int k_reg_threads = 512;    // at most: 2+ blocks per SM without spills
constexpr int k_cache_bytes = 110 << 10;  // row cache limit: two blocks per SM (227 KiB)

template <class T, int V, int N>
__global__ void __launch_bounds__(k_reg_threads) cross_entropy_reg_kernel(
    const T* __restrict__ logits, const int32_t* __restrict__ targets, float* __restrict__ loss,
    T* __restrict__ dlogits, int64_t rows, int64_t cols) {
  using Slice = detail::RowSlice<T, V, N>;
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const int tid = threadIdx.x, nt = blockDim.x;
  const T* x = logits + off;
  Slice xs;
  xs.load(x, cols, tid, nt);
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (Slice::in_row(tid, nt, k, cols))
#pragma unroll
      for (int i = 0; i < V; ++i) m = fmaxf(m, xs.at(k, i));
  const float mx = detail::block_max(m);
  float tot[1] = {0.0f};
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (Slice::in_row(tid, nt, k, cols))
#pragma unroll
      for (int i = 0; i < V; ++i) tot[0] += expf(xs.fresh(k, i) - mx);
  detail::block_sum(tot);
  const float lse = mx + logf(tot[0]);
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < cols;
  if (threadIdx.x == 0)
    loss[blockIdx.x] = valid ? lse - detail::to_f32(x[target]) : std::numeric_limits<float>::quiet_NaN();
  if (dlogits == nullptr) return;
  const float inv_rows = 1.0f / static_cast<float>(rows);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (!Slice::in_row(tid, nt, k, cols)) continue;
    const int64_t c = Slice::col(tid, nt, k, 0);
    float g[V];
#pragma unroll
    for (int i = 0; i < V; ++i)
      g[i] = (expf(xs.fresh(k, i) - lse) - (c + i == target ? 1.0f : 0.0f)) * inv_rows;
    detail::store_f32<T, V>(dlogits + off + c, g);
  }
}

template <class T, int V>
void launch_cross_entropy(const T* logits, const int32_t* targets, float* loss, T* dlogits,
                          int64_t rows, int64_t cols, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(rows);
  const int threads = detail::row_threads_ilp(cols / V);
  const int64_t bytes = cols * static_cast<int64_t>(sizeof(T));
  if (const int t = detail::reg_row_threads(cols / V, k_packs, k_reg_threads); t > 0) {
    cross_entropy_reg_kernel<T, V, k_packs><<<blocks, t, 0, stream>>>(logits, targets, loss,
                                                                      dlogits, rows, cols);
  } else if (dlogits != nullptr && bytes <= k_cache_bytes) {
    static const bool opted_in = [] {  // once per instantiation: a host attribute, capturable
      PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(cross_entropy_kernel<T, V, true>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              k_cache_bytes));
      return true;
    }();
    (void)opted_in;
    cross_entropy_kernel<T, V, true><<<blocks, threads, static_cast<size_t>(bytes), stream>>>(
        logits, targets, loss, dlogits, rows, cols);
  } else {
    cross_entropy_kernel<T, V, false><<<blocks, threads, 0, stream>>>(logits, targets, loss,
                                                                      dlogits, rows, cols);
  }
}

}  // namespace

template <class T>
void cross_entropy(const T* logits, const int32_t* targets, float* loss,
                   std::type_identity_t<T>* dlogits, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  constexpr int vec = detail::vec_of<T>;
  if (cols % vec == 0 && detail::aligned(16, logits, dlogits))
    launch_cross_entropy<T, vec>(logits, targets, loss, dlogits, rows, cols, stream);
  else
    launch_cross_entropy<T, 1>(logits, targets, loss, dlogits, rows, cols, stream);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template void cross_entropy<float>(const float*, const int32_t*, float*, float*, int64_t, int64_t,
                                   cudaStream_t);
template void cross_entropy<__nv_bfloat16>(const __nv_bfloat16*, const int32_t*, float*,
                                           __nv_bfloat16*, int64_t, int64_t, cudaStream_t);
template void cross_entropy<__half>(const __half*, const int32_t*, float*, __half*, int64_t,
                                    int64_t, cudaStream_t);

}  // namespace perfsim::cuda
