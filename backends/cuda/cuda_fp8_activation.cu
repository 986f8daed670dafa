// Activation quantization for fp8 GEMMs (see cuda_fp8_activation.hpp). Loads are 16-byte
// vectors (V elements) when x and q are aligned for it, scalar otherwise.
#include "backends/cuda/cuda_fp8_activation.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <stdexcept>

#include "backends/cuda/cuda_check.hpp"

namespace perfsim::cuda {

namespace {

constexpr int single_threads = 1024;  // the single-block kernel
constexpr int threads = 256;          // the two-kernel path
constexpr int max_parts = 1024;       // partials the cast kernel reduces

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

__device__ __forceinline__ uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// V elements of T read as one aligned vector (V * sizeof(T) is 16 bytes, or V == 1).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
template <int V>
struct alignas(V) Bytes {
  uint8_t v[V];
};

// Max over threads of the block; every thread gets the result.
template <int Threads>
__device__ float block_max(float m) {
  __shared__ float warp_max[Threads / 32];
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  m = 0.0f;
  for (int w = 0; w < Threads / 32; ++w) m = fmaxf(m, warp_max[w]);
  __syncthreads();  // warp_max may be reused by a later call
  return m;
}

// max|x| over the packs [first, packs) with step `stride`, plus the scalar tail (block 0 only).
template <class T, int V>
__device__ float local_absmax(const T* __restrict__ x, int64_t n, int64_t first, int64_t stride, bool tail) {
  const auto* p = reinterpret_cast<const Pack<T, V>*>(x);
  const int64_t packs = n / V;
  float m = 0.0f;
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<T, V> v = p[i];
#pragma unroll
    for (int j = 0; j < V; ++j) m = fmaxf(m, fabsf(to_f(v.v[j])));
  }
  if (tail)
    for (int64_t i = packs * V + threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, fabsf(to_f(x[i])));
  return m;
}

template <class T, int V>
__device__ void cast_range(const T* __restrict__ x, uint8_t* __restrict__ q, int64_t n, float inv, int64_t first,
                           int64_t stride, bool tail) {
  const auto* p = reinterpret_cast<const Pack<T, V>*>(x);
  auto* out = reinterpret_cast<Bytes<V>*>(q);
  const int64_t packs = n / V;
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<T, V> v = p[i];
    Bytes<V> b;
#pragma unroll
    for (int j = 0; j < V; ++j) b.v[j] = to_e4m3(to_f(v.v[j]) * inv);
    out[i] = b;
  }
  if (tail)
    for (int64_t i = packs * V + threadIdx.x; i < n; i += blockDim.x) q[i] = to_e4m3(to_f(x[i]) * inv);
}

__device__ __forceinline__ float scale_of(float amax) { return amax > 0.0f ? amax / e4m3_max : 1.0f; }

template <class T, int V>
__global__ void __launch_bounds__(single_threads)
    single_block_kernel(const T* __restrict__ x, uint8_t* __restrict__ q, float* __restrict__ scale, int64_t n) {
  const float amax = block_max<single_threads>(local_absmax<T, V>(x, n, threadIdx.x, blockDim.x, true));
  const float sc = scale_of(amax);
  if (threadIdx.x == 0) *scale = sc;
  cast_range<T, V>(x, q, n, 1.0f / sc, threadIdx.x, blockDim.x, true);
}

template <class T, int V>
__global__ void __launch_bounds__(threads)
    partials_kernel(const T* __restrict__ x, int64_t n, float* __restrict__ parts) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const float m = block_max<threads>(
      local_absmax<T, V>(x, n, int64_t{blockIdx.x} * blockDim.x + threadIdx.x, stride, blockIdx.x == 0));
  if (threadIdx.x == 0) parts[blockIdx.x] = m;
}

template <class T, int V>
__global__ void __launch_bounds__(threads) cast_kernel(const T* __restrict__ x, uint8_t* __restrict__ q,
                                                       float* __restrict__ scale, const float* __restrict__ parts,
                                                       int n_parts, int64_t n) {
  float m = 0.0f;
  for (int i = threadIdx.x; i < n_parts; i += blockDim.x) m = fmaxf(m, parts[i]);
  const float sc = scale_of(block_max<threads>(m));
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = sc;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  cast_range<T, V>(x, q, n, 1.0f / sc, int64_t{blockIdx.x} * blockDim.x + threadIdx.x, stride, blockIdx.x == 0);
}

int parts_for(int64_t n) {
  // About 8 packs of 16 bytes per thread per kernel, at most max_parts blocks.
  return static_cast<int>(std::clamp<int64_t>((n + threads * 32 - 1) / (threads * 32), 1, max_parts));
}

template <class T, int V>
void launch(const T* x, uint8_t* q, float* scale, float* parts, int64_t n, cudaStream_t s) {
  if (n <= fp8_single_block_max) {
    single_block_kernel<T, V><<<1, single_threads, 0, s>>>(x, q, scale, n);
    PERFSIM_CUDA_CHECK_LAUNCH();
    return;
  }
  const int g = parts_for(n);
  partials_kernel<T, V><<<g, threads, 0, s>>>(x, n, parts);
  PERFSIM_CUDA_CHECK_LAUNCH();
  cast_kernel<T, V><<<g, threads, 0, s>>>(x, q, scale, parts, g, n);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_typed(const void* x, uint8_t* q, float* scale, void* ws, int64_t n, cudaStream_t s) {
  constexpr int v = 16 / static_cast<int>(sizeof(T));
  const auto* xt = static_cast<const T*>(x);
  auto* parts = static_cast<float*>(ws);
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(q) % v == 0;
  if (aligned) launch<T, v>(xt, q, scale, parts, n, s);
  else launch<T, 1>(xt, q, scale, parts, n, s);
}

}  // namespace

std::size_t fp8_activation_workspace_bytes(int64_t n) {
  return n <= fp8_single_block_max ? 0 : static_cast<std::size_t>(parts_for(n)) * sizeof(float);
}

void quantize_activation_e4m3(const void* x, Elem x_type, uint8_t* q, float* scale, void* workspace, int64_t n,
                              cudaStream_t stream) {
  if (n <= 0) return;
  switch (x_type) {
    case Elem::f32: launch_typed<float>(x, q, scale, workspace, n, stream); break;
    case Elem::bf16: launch_typed<__nv_bfloat16>(x, q, scale, workspace, n, stream); break;
    case Elem::f16: launch_typed<__half>(x, q, scale, workspace, n, stream); break;
    default: throw std::invalid_argument("cuda quantize_activation_e4m3: source must be f32, bf16 or f16");
  }
}

}  // namespace perfsim::cuda
