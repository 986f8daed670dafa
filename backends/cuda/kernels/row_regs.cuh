// Row-in-registers helpers for the memory-bound row kernels (norms, softmax, cross-entropy):
// a row of `cols` elements is split into 16-byte packs (V elements each, V = 1 on the scalar
// path); thread t of `stride` threads holds packs k = 0..N-1 at columns (t + k·stride)·V, so
// a warp's k-th load is contiguous (coalesced). Holding the row as raw packs lets a kernel
// read it from DRAM once, reduce, and write it without a second sweep. Packs past the row end
// are zero-filled and must be masked by the caller (`in_row`). Also the cp.async helpers the
// kernels that stage rows in shared memory use (norm backward ring, cross-entropy row cache).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda::detail {

// Widening the compiler may not common out (asm volatile): kernels that sweep a held row
// several times around block barriers use it so that only the raw packs stay live, not a
// float copy of the row (which would spill at 1024 threads).
__device__ __forceinline__ float fresh_f32(float x) { return x; }
__device__ __forceinline__ float fresh_f32(__nv_bfloat16 x) {
  unsigned r;
  asm volatile("cvt.u32.u16 %0, %1;" : "=r"(r) : "h"(__bfloat16_as_ushort(x)));
  return __uint_as_float(r << 16);
}
__device__ __forceinline__ float fresh_f32(__half x) {
  float r;
  asm volatile("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(__half_as_ushort(x)));
  return r;
}

// e^x = 2^(x·log2e): softmax-like rows compute 2^(x·log2e − max·log2e), one FFMA and one
// MUFU.EX2 (relative error ~2^-22) instead of an accurate expf's ~10 instructions, which
// would make a bf16 row compute-bound.
constexpr float k_log2e = 1.4426950408889634f;
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 16 bytes global → shared without passing through registers (L2 only: .cg). A thread that
// later reads back only what it copied itself needs no block barrier, only cp_async_wait.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most `pending` (0..3) of this thread's copy groups are still in flight.
__device__ __forceinline__ void cp_async_wait(int pending) {
  switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
  }
}

template <class T, int V, int N>
struct RowSlice {
  Pack<T, V> p[N];

  // Column of element (k, i) for thread `tid` of `stride` threads.
  __device__ __forceinline__ static int64_t col(int tid, int stride, int k, int i) {
    return (static_cast<int64_t>(tid) + static_cast<int64_t>(k) * stride) * V + i;
  }
  __device__ __forceinline__ static bool in_row(int tid, int stride, int k, int64_t cols) {
    return col(tid, stride, k, 0) < cols;
  }
  // Loads this thread's packs of `row` (cols elements); packs past `limit` (≤ cols) are zeros.
  __device__ __forceinline__ void load(const T* __restrict__ row, int64_t limit, int tid,
                                       int stride) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int64_t c = col(tid, stride, k, 0);
      if (c < limit) {
        p[k] = *reinterpret_cast<const Pack<T, V>*>(row + c);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) p[k].v[i] = from_f32<T>(0.0f);
      }
    }
  }
  // Writes this thread's share of a float row (cols elements) from v: the norm backward
  // passes' per-column partial sums.
  __device__ __forceinline__ static void store(float* __restrict__ row, const float (&v)[N][V],
                                               int tid, int stride, int64_t cols) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!in_row(tid, stride, k, cols)) continue;
#pragma unroll
      for (int i = 0; i < V; ++i) row[col(tid, stride, k, i)] = v[k][i];
    }
  }
  __device__ __forceinline__ float at(int k, int i) const { return to_f32(p[k].v[i]); }
  __device__ __forceinline__ float fresh(int k, int i) const { return fresh_f32(p[k].v[i]); }
};

// Packs per thread of the norm kernels. The persistent backward passes hold gamma, their
// partial sums and two rows (current and next) of x and dy: 2 packs each keep them within 128
// registers at 512 threads (rows up to 8192 bf16 / 4096 fp32 elements).
template <int V> inline constexpr int fwd_packs = V == 1 ? 16 : 4;
template <int V> inline constexpr int bwd_packs = V == 1 ? 8 : 2;
constexpr int bwd_max_threads = 512;

// Threads for a block holding a row of `units` packs, N packs per thread: a multiple of 32,
// at least 32; 0 when the row does not fit in `max_threads` (the caller falls back).
inline int reg_row_threads(int64_t units, int n, int max_threads = 1024) {
  const int64_t t = ((units + n - 1) / n + 31) / 32 * 32;
  if (t > max_threads) return 0;
  return static_cast<int>(t < 32 ? 32 : t);
}

// Resident blocks per SM of `kernel` at `threads` threads (a host query; capturable).
template <class K>
inline int blocks_per_sm(K kernel, int threads, size_t smem = 0) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess || n < 1)
    n = 1;
  return n;
}

}  // namespace perfsim::cuda::detail
