// Device helpers shared by the memory-bound kernels: float widening/narrowing for the three
// storage types, 16-byte vector packs, warp/block sums, grid sizing for grid-stride loops, and
// how an fp8 KV cache is told apart. Every kernel computes in fp32 and only rounds when it stores.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace perfsim::cuda::detail {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <class T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
// Round to nearest-even, as the CPU reference's bf16/half narrowing does.
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

// K/V stored as Kv beside the op's float type T: Kv = T, or __nv_fp8_e4m3 for an fp8 cache (the
// fp8_kv pass, ops::KvStorage: value = stored · scale; written as e4m3(x / scale), saturating).
template <class T, class Kv>
inline constexpr bool kv_is_fp8 = __is_same(Kv, __nv_fp8_e4m3) && !__is_same(T, Kv);

// The scale of the K/V values of a cache (kv: ops::KvStorage) a launcher instantiated for Kv
// reads or writes: an fp8 cache's, else 1. The attention launchers fold it in rather than
// applying it per element: K's into the softmax scale (q·k·scale/√d), V's into the output's
// normalization (Σ p·v · scale / l). Throws std::logic_error when the cache's storage is not Kv.
template <class T, class Kv, class KvStorage>
float kv_scale_of(const KvStorage& kv, const char* who) {
  if (kv.fp8 != kv_is_fp8<T, Kv>)
    throw std::logic_error(std::string(who) + (kv.fp8 ? ": an fp8 KV cache passed as the op's float type"
                                                     : ": a float KV cache passed as fp8"));
  return kv.fp8 ? kv.scale : 1.0f;
}

// Elements of T in one 16-byte load.
template <class T> inline constexpr int vec_of = 16 / static_cast<int>(sizeof(T));

// V consecutive elements moved as one aligned load/store (V·sizeof(T) ≤ 16 bytes).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <class T, int V>
__device__ __forceinline__ void load_f32(const T* p, float (&out)[V]) {
  const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = to_f32(pk.v[i]);
}

template <class T, int V>
__device__ __forceinline__ void store_f32(T* p, const float (&in)[V]) {
  Pack<T, V> pk;
#pragma unroll
  for (int i = 0; i < V; ++i) pk.v[i] = from_f32<T>(in[i]);
  *reinterpret_cast<Pack<T, V>*>(p) = pk;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sums N values over the whole block; every thread gets the totals. Uses 32·N floats of
// shared memory and two barriers, so it may be called repeatedly in one kernel.
template <int N>
__device__ __forceinline__ void block_sum(float (&v)[N]) {
  __shared__ float partial[N][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = warp_sum(v[k]);
  __syncthreads();  // a previous call may still be reading `partial`
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) partial[k][warp] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float s = lane < warps ? partial[k][lane] : 0.0f;
    v[k] = warp_sum(s);
  }
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? partial[lane] : -INFINITY);
}

// True when every pointer is aligned to `bytes` (16-byte vector paths need it).
inline bool aligned(std::uintptr_t bytes) { return true; }
template <class P, class... Rest>
inline bool aligned(std::uintptr_t bytes, const P* p, const Rest*... rest) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0 && aligned(bytes, rest...);
}

// SMs of the current device, read once per process (a host attribute query: capturable).
int sm_count();

// Blocks for a grid-stride loop over `work` items of `threads` each: enough to fill the
// device several times over, never more than the work needs.
inline unsigned grid_for(int64_t work, int threads) {
  const int64_t needed = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count()) * 16;
  return static_cast<unsigned>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

// Threads for a one-block-per-row kernel touching `units` vectors per row.
inline int row_threads(int64_t units) {
  int64_t t = (units + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > 256) t = units >= 4096 ? 512 : 256;
  return static_cast<int>(t);
}

// Threads for a one-block-per-row kernel whose first sweep is latency-bound (a dependent
// max/sum chain per row): about 4 vectors per thread keep several loads in flight, and wide
// rows get 1024 threads so that fewer rows are resident at once and the second sweep still
// finds its row in L2.
inline int row_threads_ilp(int64_t units) {
  int64_t t = ((units + 3) / 4 + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 1024 ? 1024 : t));
}

}  // namespace perfsim::cuda::detail
