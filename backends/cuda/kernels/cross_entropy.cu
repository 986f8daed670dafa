// Fused softmax cross-entropy (as llm.c's fused classifier): one block per row of logits
// [rows, cols], never a probability tensor. Rows up to 4096 packs are held in registers
// (row_regs.cuh) and read from DRAM once: max, Σexp → log-sum-exp, then the mean-loss
// gradient (softmax − onehot)/mean_rows. Wider rows up to 110 KiB are copied whole into shared
// memory by cp.async (all of a thread's 16-byte packs in flight at once), and the max, the
// Σexp and the gradient sweeps read them from there: the row leaves DRAM once. Wider rows
// stream twice: the first sweep keeps an online (max, Σexp) pair per thread (Milakov &
// Gimelshein 2018). Exponentials are 2^(x·log2e − m·log2e) by ex2.approx (one FFMA and one
// MUFU per element, relative error ~2^-22): with accurate expf and a per-element target
// test the 50304-wide bf16 rows were issue-bound (≈70% of a copy).
#include <limits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/cross_entropy.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/row_regs.cuh"
#include "core/cost/kernel_paths.hpp"

namespace perfsim::cuda {

namespace {

using detail::exp2_approx;
using detail::k_log2e;

// Gradient of the pack at column c (V elements): (softmax − onehot)/rows, where
// softmax = 2^(x·log2e − lse·log2e); the target's −1/rows is applied by the one thread whose
// pack holds it (one compare per pack, not per element).
template <int V>
__device__ __forceinline__ void grad_pack(const float (&v)[V], int64_t c, int64_t target, float lse2,
                                          float inv_rows, float (&g)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) g[i] = exp2_approx(fmaf(v[i], k_log2e, -lse2)) * inv_rows;
  const uint64_t d = static_cast<uint64_t>(target - c);
  if (d < static_cast<uint64_t>(V)) {
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (static_cast<uint64_t>(i) == d) g[i] -= inv_rows;
  }
}

// Combines per-thread (max, Σ 2^(x·log2e − max·log2e)) pairs over the block: the row's
// natural-log log-sum-exp.
__device__ __forceinline__ float block_lse(float m, float s) {
  const float mx = detail::block_max(m);
  float tot[1] = {m == -INFINITY ? 0.0f : s * exp2_approx((m - mx) * k_log2e)};
  detail::block_sum(tot);
  return mx + logf(tot[0]);
}

__device__ __forceinline__ void write_loss(float* loss, float lse, float x_target, bool valid) {
  if (threadIdx.x == 0)
    loss[blockIdx.x] = valid ? lse - x_target : std::numeric_limits<float>::quiet_NaN();
}

// Two sweeps over global memory (rows too wide for the shared-memory cache, or no gradient).
template <class T, int V>
__global__ void cross_entropy_kernel(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                                     float* __restrict__ loss, T* __restrict__ dlogits,
                                     int64_t mean_rows, int64_t cols) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const T* x = logits + off;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float m = -INFINITY, s = 0.0f;  // s = Σ 2^((x − m)·log2e)
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    detail::load_f32<T, V>(x + c, v);
    float vm = v[0];
#pragma unroll
    for (int i = 1; i < V; ++i) vm = fmaxf(vm, v[i]);
    if (vm > m) {
      s *= exp2_approx((m - vm) * k_log2e);  // 2^(−inf) = 0 on the first chunk
      m = vm;
    }
    const float ml = m * k_log2e;
#pragma unroll
    for (int i = 0; i < V; ++i) s += exp2_approx(fmaf(v[i], k_log2e, -ml));
  }
  const float lse = block_lse(m, s);
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < cols;
  write_loss(loss, lse, valid && threadIdx.x == 0 ? detail::to_f32(x[target]) : 0.0f, valid);
  if (dlogits == nullptr) return;
  const float inv_rows = 1.0f / static_cast<float>(mean_rows), lse2 = lse * k_log2e;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V];
    detail::load_f32<T, V>(x + c, v);
    grad_pack<V>(v, c, target, lse2, inv_rows, g);
    detail::store_f32<T, V>(dlogits + off + c, g);
  }
}

// The row copied whole into shared memory (cols·sizeof(T) bytes, dynamic), then three sweeps
// over it: max, Σexp (no barrier between: each thread reads back only its own packs) and,
// after the block reduction, the gradient.
template <class T, int V>
__global__ void __launch_bounds__(1024) cross_entropy_smem_kernel(
    const T* __restrict__ logits, const int32_t* __restrict__ targets, float* __restrict__ loss,
    T* __restrict__ dlogits, int64_t mean_rows, int64_t cols) {
  using Pk = detail::Pack<T, V>;
  extern __shared__ __align__(16) unsigned char row_cache[];
  Pk* cache = reinterpret_cast<Pk*>(row_cache);  // [cols / V]
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const T* x = logits + off;
  const int units = static_cast<int>(cols / V), tid = threadIdx.x, nt = blockDim.x;
  if constexpr (sizeof(Pk) == 16) {
    for (int u = tid; u < units; u += nt) detail::cp_async16(cache + u, x + static_cast<int64_t>(u) * V);
    detail::cp_async_commit();
  } else {
    for (int u = tid; u < units; u += nt) cache[u] = reinterpret_cast<const Pk*>(x)[u];
  }
  const int64_t target = targets[blockIdx.x];  // in flight with the row
  const bool valid = target >= 0 && target < cols;
  const float x_target = valid && tid == 0 ? detail::to_f32(x[target]) : 0.0f;  // thread 0 writes
  if constexpr (sizeof(Pk) == 16) detail::cp_async_wait(0);
  float m = -INFINITY;
  for (int u = tid; u < units; u += nt) {
    const Pk pk = cache[u];
#pragma unroll
    for (int i = 0; i < V; ++i) m = fmaxf(m, detail::to_f32(pk.v[i]));
  }
  float s = 0.0f;
  const float ml = m * k_log2e;
  for (int u = tid; u < units; u += nt) {
    const Pk pk = cache[u];
#pragma unroll
    for (int i = 0; i < V; ++i) s += exp2_approx(fmaf(detail::to_f32(pk.v[i]), k_log2e, -ml));
  }
  const float lse = block_lse(m, s);
  write_loss(loss, lse, x_target, valid);
  const float inv_rows = 1.0f / static_cast<float>(mean_rows), lse2 = lse * k_log2e;
  for (int u = tid; u < units; u += nt) {
    const Pk pk = cache[u];
    float v[V], g[V];
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = detail::to_f32(pk.v[i]);
    const int64_t c = static_cast<int64_t>(u) * V;
    grad_pack<V>(v, c, target, lse2, inv_rows, g);
    detail::store_f32<T, V>(dlogits + off + c, g);
  }
}

constexpr int k_packs = 8;            // packs per thread of the register kernel
constexpr int k_reg_threads = 512;    // at most: 2+ blocks per SM without spills
static_assert(int64_t{k_packs} * k_reg_threads == cross_entropy_register_units,
              "the cost model's cross-entropy paths (core/cost/kernel_paths.hpp) follow this launcher");
constexpr int k_cache_bytes = static_cast<int>(cross_entropy_row_cache_bytes);  // two blocks per SM (227 KiB)

template <class T, int V, int N>
__global__ void __launch_bounds__(k_reg_threads) cross_entropy_reg_kernel(
    const T* __restrict__ logits, const int32_t* __restrict__ targets, float* __restrict__ loss,
    T* __restrict__ dlogits, int64_t mean_rows, int64_t cols) {
  using Slice = detail::RowSlice<T, V, N>;
  const int64_t off = static_cast<int64_t>(blockIdx.x) * cols;
  const int tid = threadIdx.x, nt = blockDim.x;
  const T* x = logits + off;
  Slice xs;
  xs.load(x, cols, tid, nt);
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < cols;
  const float x_target = valid && tid == 0 ? detail::to_f32(x[target]) : 0.0f;  // thread 0 writes
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (Slice::in_row(tid, nt, k, cols))
#pragma unroll
      for (int i = 0; i < V; ++i) m = fmaxf(m, xs.at(k, i));
  float s = 0.0f;
  const float ml = m * k_log2e;
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (Slice::in_row(tid, nt, k, cols))
#pragma unroll
      for (int i = 0; i < V; ++i) s += exp2_approx(fmaf(xs.fresh(k, i), k_log2e, -ml));
  const float lse = block_lse(m, s);
  write_loss(loss, lse, x_target, valid);
  if (dlogits == nullptr) return;
  const float inv_rows = 1.0f / static_cast<float>(mean_rows), lse2 = lse * k_log2e;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (!Slice::in_row(tid, nt, k, cols)) continue;
    const int64_t c = Slice::col(tid, nt, k, 0);
    float v[V], g[V];
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = xs.fresh(k, i);
    grad_pack<V>(v, c, target, lse2, inv_rows, g);
    detail::store_f32<T, V>(dlogits + off + c, g);
  }
}

template <class T, int V>
void launch_cross_entropy(const T* logits, const int32_t* targets, float* loss, T* dlogits,
                          int64_t rows, int64_t cols, int64_t mean_rows, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(rows);
  const int threads = detail::row_threads_ilp(cols / V);
  const int64_t bytes = cols * static_cast<int64_t>(sizeof(T));
  if (const int t = detail::reg_row_threads(cols / V, k_packs, k_reg_threads); t > 0) {
    cross_entropy_reg_kernel<T, V, k_packs><<<blocks, t, 0, stream>>>(logits, targets, loss,
                                                                      dlogits, mean_rows, cols);
  } else if (dlogits != nullptr && bytes <= k_cache_bytes) {
    static const bool opted_in = [] {  // once per instantiation: a host attribute, capturable
      PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(cross_entropy_smem_kernel<T, V>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              k_cache_bytes));
      return true;
    }();
    (void)opted_in;
    cross_entropy_smem_kernel<T, V><<<blocks, threads, static_cast<size_t>(bytes), stream>>>(
        logits, targets, loss, dlogits, mean_rows, cols);
  } else {
    cross_entropy_kernel<T, V><<<blocks, threads, 0, stream>>>(logits, targets, loss, dlogits,
                                                              mean_rows, cols);
  }
}

}  // namespace

template <class T>
void cross_entropy(const T* logits, const int32_t* targets, float* loss,
                   std::type_identity_t<T>* dlogits, int64_t rows, int64_t cols,
                   cudaStream_t stream, int64_t mean_rows) {
  if (rows <= 0 || cols <= 0) return;
  if (mean_rows <= 0) mean_rows = rows;
  constexpr int vec = detail::vec_of<T>;
  if (cols % vec == 0 && detail::aligned(16, logits, dlogits))
    launch_cross_entropy<T, vec>(logits, targets, loss, dlogits, rows, cols, mean_rows, stream);
  else
    launch_cross_entropy<T, 1>(logits, targets, loss, dlogits, rows, cols, mean_rows, stream);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template void cross_entropy<float>(const float*, const int32_t*, float*, float*, int64_t, int64_t,
                                   cudaStream_t, int64_t);
template void cross_entropy<__nv_bfloat16>(const __nv_bfloat16*, const int32_t*, float*,
                                           __nv_bfloat16*, int64_t, int64_t, cudaStream_t, int64_t);
template void cross_entropy<__half>(const __half*, const int32_t*, float*, __half*, int64_t,
                                    int64_t, cudaStream_t, int64_t);

}  // namespace perfsim::cuda
