// Device helpers shared by the attention kernels: float widening/narrowing for the three
// storages and fp8 e4m3 (an fp8 KV cache, read only), warp reductions, the lane geometry and
// K/V word helpers of the split-KV decode kernels, and the sm_80+ PTX the tensor-core path is
// built from (cp.async with zero fill, ldmatrix, mma.sync m16n8k16 with fp32 accumulation).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda::attn_detail {

// The storage conversions of kernel_util.cuh (round to nearest-even when narrowing).
template <class T> __device__ __forceinline__ float to_float(T x) { return detail::to_f32(x); }
template <class T> __device__ __forceinline__ T from_float(float x) { return detail::from_f32<T>(x); }
// fp8 e4m3 K/V elements widen exactly (the launchers fold their scale in: kv_scale_of).
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) { return static_cast<float>(x); }

// An fp8 KV cache's storage and scale (kernel_util.cuh).
using detail::kv_is_fp8;
using detail::kv_scale_of;

// Elements e and e + 1 (e even, a compile-time index after unrolling) of 16-byte words
// holding Kv elements, widened to float. fp8 pairs take one cvt.rn.f16x2.e4m3x2 (sm_89+) and
// two half -> float conversions.
template <class Kv, int P>
__device__ __forceinline__ float2 kv_pair(const uint4 (&w)[P], int e) {
  if constexpr (__is_same(Kv, __nv_fp8_e4m3)) {
    const auto x = reinterpret_cast<const __nv_fp8x2_storage_t*>(&w[0])[e / 2];
    return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(x, __NV_E4M3)));
  } else {
    const Kv* v = reinterpret_cast<const Kv*>(&w[0]);
    return make_float2(to_float(v[e]), to_float(v[e + 1]));
  }
}

// Lane geometry of the split-KV decode kernels (decode_attention.cu, varlen_attention.cu): a
// head_dim-D row of K/V stored as Kv is read by L lanes with 16-byte loads (16 fp8 or 8 bf16
// elements each, so an fp8 row takes half the lanes and bytes), E elements (P words) per lane,
// G rows per warp load; the lane's E elements of a query row, stored as T, take QP words.
template <class T, class Kv, int D>
struct SplitGeometry {
  static constexpr int pack = 16 / int(sizeof(Kv));
  static constexpr int L = D / pack < 32 ? D / pack : 32;
  static constexpr int E = D / L;
  static constexpr int P = E / pack;
  static constexpr int G = 32 / L;
  static constexpr int QP = E * int(sizeof(T)) / 16;
  static_assert(E % 2 == 0 && P >= 1 && QP >= 1 && QP * 16 == E * int(sizeof(T)));
};

template <int P>
__device__ __forceinline__ void load_words(const void* p, uint4 (&w)[P]) {
#pragma unroll
  for (int c = 0; c < P; ++c) w[c] = reinterpret_cast<const uint4*>(p)[c];
}

// The lane's E query elements (stored as T at p) times `scale`.
template <class T, int E, int QP>
__device__ __forceinline__ void load_query(const T* p, float scale, float (&qf)[E]) {
  uint4 w[QP];
  load_words<QP>(p, w);
#pragma unroll
  for (int e = 0; e < E; ++e) qf[e] = to_float(reinterpret_cast<const T*>(&w[0])[e]) * scale;
}

// The lane's E elements of a K/V row held in words, widened to float.
template <class Kv, int E, int P>
__device__ __forceinline__ void widen_lane(const uint4 (&w)[P], float (&out)[E]) {
#pragma unroll
  for (int e = 0; e < E; e += 2) {
    const float2 f = kv_pair<Kv, P>(w, e);
    out[e] = f.x;
    out[e + 1] = f.y;
  }
}

// One warp step of the split-KV decode kernels' online softmax (decode_attention.cu,
// varlen_attention.cu). The warp's lanes form G = 32/L groups of L lanes; group g loaded keys
// u·G + g (u < U) into kw/vw, each lane E elements of them. For the first `live` of R query
// rows (qf: the lane's E elements, pre-scaled): scores s = q·k summed over the L lanes
// (masked to −inf where !visible(r, u)), the running max m (warp-wide), denominator l and
// accumulator acc updated once per step; a row that sees nothing yet is left as it is. Each
// key element is widened once per step, whatever R (keys outer, rows inner), so an fp8 lane's 16
// elements stay few registers beside the rows' state.
template <class Kv, int R, int U, int E, int P, int L, class Visible>
__device__ __forceinline__ void split_kv_step(const float (&qf)[R][E], const uint4 (&kw)[U][P],
                                              const uint4 (&vw)[U][P], int live, Visible visible, float (&m)[R],
                                              float (&l)[R], float (&acc)[R][E]) {
  float s[R][U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    float kf[E];
    widen_lane<Kv, E, P>(kw[u], kf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= live) break;
      float dot = 0.f;
#pragma unroll
      for (int e = 0; e < E; ++e) dot += qf[r][e] * kf[e];
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      s[r][u] = visible(r, u) ? dot : -INFINITY;
    }
  }
  float m_new[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= live) break;
    float bm = -INFINITY;
#pragma unroll
    for (int u = 0; u < U; ++u) bm = fmaxf(bm, s[r][u]);
#pragma unroll
    for (int o = L; o < 32; o <<= 1) bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, o));
    m_new[r] = fmaxf(m[r], bm);
    if (m_new[r] == -INFINITY) continue;  // warp-uniform: nothing visible yet
    const float corr = expf(m[r] - m_new[r]);
    l[r] *= corr;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[r][e] *= corr;
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    float vf[E];
    widen_lane<Kv, E, P>(vw[u], vf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= live) break;
      if (m_new[r] == -INFINITY) continue;
      const float pj = expf(s[r][u] - m_new[r]);  // 0 for masked keys
      l[r] += pj;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[r][e] += pj * vf[e];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (r < live) m[r] = m_new[r];
}

// Two floats as one 32-bit register of 16-bit values, `lo` in the low half (the lower
// column of an mma fragment).
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; copies 0 source bytes (fills zeros) when !valid.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c[16x8] += a[16x16] · b[16x8], 16-bit inputs, fp32 accumulators (PTX ISA, mma.m16n8k16).
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (__is_same(T, __nv_bfloat16)) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

constexpr float k_log2e = 1.4426950408889634f;
constexpr float k_ln2 = 0.6931471805599453f;

}  // namespace perfsim::cuda::attn_detail
