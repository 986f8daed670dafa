// GEMMs on quantized weights (quantized_gemm.cuh).
#include <cooperative_groups.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/quantized_gemm.cuh"
#include "core/cost/kernel_paths.hpp"

namespace perfsim::cuda {

namespace {

namespace cg = cooperative_groups;
using detail::from_f32;
using detail::to_f32;

// Warps of a CTA, all over the same columns, each a chunk of rows: 16 for one or two rows of A,
// 8 for more (whose sums take twice the registers).
template <int M> inline constexpr int gemv_warps = M <= 2 ? 16 : 8;
constexpr int gemv_tile = static_cast<int>(quantized_gemv_tile);  // a lane's 8 columns × 32
constexpr int gemv_batch = static_cast<int>(quantized_gemv_batch_rows);
constexpr int dequant_cols = 8;  // the dequantization kernel's columns per thread
static_assert(gemv_tile == 32 * 8 && gemv_batch == 8, "a lane's 8 columns; 8 rows of A in one 16-byte load");

// 2^23 + v as a float: v sits in the mantissa of 0x4B000000 (exact for v < 2^23). Widening a
// small integer this way costs a byte permute and a subtraction instead of a slow int-to-float.
constexpr float magic = 8388608.0f;

// A thread's row of C columns of the weight: C/2 bytes of int4 or C bytes of int8, as words.
template <bool Int4, int C>
struct RowBits {
  static constexpr int bytes = Int4 ? C / 2 : C;
  static constexpr int words = bytes / 4;
  static_assert(bytes % 4 == 0 && bytes <= 8, "4 or 8 bytes a row");
  uint32_t w[words];
  __device__ __forceinline__ void load(const uint8_t* p) {
    if constexpr (words == 2) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
      w[0] = v.x, w[1] = v.y;
    } else {
      w[0] = __ldg(reinterpret_cast<const uint32_t*>(p));
    }
  }
  __device__ __forceinline__ void load_shared(const uint8_t* p) {
    if constexpr (words == 2) {
      const uint2 v = *reinterpret_cast<const uint2*>(p);
      w[0] = v.x, w[1] = v.y;
    } else {
      w[0] = *reinterpret_cast<const uint32_t*>(p);
    }
  }
  // The C values dequantized: (q − zero) · scale = q · s − zero · s (zs = zero · s).
  __device__ __forceinline__ void dequantize(const float (&s)[C], const float (&zs)[C], float (&out)[C]) const {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if constexpr (Int4) {  // eight nibbles a word, the low nibble first
        const float q = __uint_as_float(0x4B000000u | ((w[c / 8] >> (4 * (c % 8))) & 0xFu)) - magic;
        out[c] = fmaf(q, s[c], -zs[c]);
      } else {  // four bytes a word; q + 128 = byte ^ 0x80, placed as [q + 128, 0, 0, 0x4B]
        const uint32_t bits = __byte_perm(w[c / 4] ^ 0x80808080u, 0x4B000000u, 0x7540u | static_cast<uint32_t>(c % 4));
        out[c] = (__uint_as_float(bits) - (magic + 128.0f)) * s[c];
      }
    }
  }
};

// A lane's 8 codes of one row as floats, the fused kernel's way:
//   int4: v = 1 + q/128, q placed by a byte permute under the exponent of 1.0 (each byte's low
//         nibble is an even column, its high nibble the next one), so no subtraction per value;
//         Σ x·q over a batch is 128·(Σ x·v − Σ x);
//   int8: v = q exactly (2^23 + q + 128 less its offset), Σ x·q directly.
template <bool Int4>
__device__ __forceinline__ void widen(const RowBits<Int4, 8>& r, float (&v)[8]) {
  if constexpr (Int4) {
    const uint32_t lo = (r.w[0] & 0x0F0F0F0Fu) | 0x80808080u, hi = ((r.w[0] >> 4) & 0x0F0F0F0Fu) | 0x80808080u;
#pragma unroll
    for (int b = 0; b < 4; ++b) {  // bytes [0, 0, 0x80 | q, 0x3F]
      v[2 * b] = __uint_as_float(__byte_perm(lo, 0x3F000000u, 0x7054u | (static_cast<uint32_t>(b) << 8)));
      v[2 * b + 1] = __uint_as_float(__byte_perm(hi, 0x3F000000u, 0x7054u | (static_cast<uint32_t>(b) << 8)));
    }
  } else {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const uint32_t bits = __byte_perm(r.w[c / 4] ^ 0x80808080u, 0x4B000000u, 0x7540u | static_cast<uint32_t>(c % 4));
      v[c] = __uint_as_float(bits) - (magic + 128.0f);
    }
  }
}

// 8 bf16 values at p (16-byte aligned), as floats.
__device__ __forceinline__ void load_bf16x8(const void* p, float (&out)[8]) {
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  const auto* h = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
  for (int j = 0; j < 8; ++j) out[j] = __bfloat162float(h[j]);
}

__device__ __forceinline__ void store_c(void* c, int c_type, int64_t i, float v, bool accumulate) {
  switch (c_type) {
    case 0: {
      float* p = static_cast<float*>(c);
      p[i] = accumulate ? p[i] + v : v;
      break;
    }
    case 1: {
      auto* p = static_cast<__nv_bfloat16*>(c);
      p[i] = from_f32<__nv_bfloat16>(accumulate ? to_f32(p[i]) + v : v);
      break;
    }
    default: {
      auto* p = static_cast<__half*>(c);
      p[i] = from_f32<__half>(accumulate ? to_f32(p[i]) + v : v);
    }
  }
}

// Both GEMV kernels' end: each lane's sums of its 8 columns (acc, rows of A by 8 columns) meet
// the other warps' in shared memory, row by row; then the cluster's CTAs (the slices of K of
// this column tile) each add up a share of the tile over all of them, through distributed
// shared memory, and write it into C.
template <int M>
__device__ __forceinline__ void sum_tile_into_c(const float (&acc)[M][8], int m_rows, int64_t col0, int64_t n, void* c,
                                                int c_type, bool accumulate) {
  constexpr int warps = gemv_warps<M>, threads = 32 * warps;
  __shared__ __align__(16) float red[warps][gemv_tile];
  __shared__ float tile_sums[M][gemv_tile];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    if (m >= m_rows) break;  // the same for every thread: the barriers stay uniform
    *reinterpret_cast<float4*>(&red[warp][lane * 8]) = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
    *reinterpret_cast<float4*>(&red[warp][lane * 8 + 4]) = make_float4(acc[m][4], acc[m][5], acc[m][6], acc[m][7]);
    __syncthreads();
    if (tid < gemv_tile) {
      float total = 0;
#pragma unroll
      for (int w = 0; w < warps; ++w) total += red[w][tid];
      tile_sums[m][tid] = total;
    }
    __syncthreads();
  }

  // The cluster's slices of this tile: CTA `rank` adds up its share over all of them.
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int ranks = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int total = m_rows * gemv_tile, share = (total + ranks - 1) / ranks;
  for (int i = rank * share + tid; i < min(total, (rank + 1) * share); i += threads) {
    float v = 0;
    for (int q = 0; q < ranks; ++q) v += cluster.map_shared_rank(&tile_sums[0][0], q)[i];
    const int64_t col = col0 + i % gemv_tile;
    if (col < n) store_c(c, c_type, static_cast<int64_t>(i / gemv_tile) * n + col, v, accumulate);
  }
  cluster.sync();  // the other CTAs still read this one's sums
}

// The int8 kernel: as quantized_gemv_kernel, but each warp loads its batches' codes straight
// into registers (8 bytes a lane a row: two CTAs a SM already keep HBM busy).
// blockIdx.x: 256 columns; blockIdx.y: a slice of K, split among the warps in chunks of
// whole batches of 8 rows. Per batch a lane loads its 8 rows' codes, the batch's group scales
// (and zeros) and 8 values of each row of A, sums x·v per column, then folds the batch into its
// sums with the scales. The warps' sums meet in shared memory; the cluster's CTAs (the slices
// of this column tile) each add up a share of the tile over all of them and write it into C.
template <class TA, int M, bool Int4>
__global__ void __launch_bounds__(32 * gemv_warps<M>)
    quantized_gemv_direct_kernel(const TA* __restrict__ a, int m_rows, const uint8_t* __restrict__ values,
                          const __nv_bfloat16* __restrict__ scales, const __nv_bfloat16* __restrict__ zeros, int64_t k,
                          int64_t n, int64_t group, int64_t k_per_split, void* c, int c_type, bool accumulate) {
  constexpr int warps = gemv_warps<M>;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * gemv_tile, n0 = col0 + lane * 8;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * k_per_split, k1 = min(k, k0 + k_per_split);
  const int64_t per_warp = (k_per_split / warps + gemv_batch - 1) / gemv_batch * gemv_batch;
  const int64_t kb = k0 + warp * per_warp, ke = min(k1, kb + per_warp);

  float acc[M][8];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.0f;

  if (n0 < n) {
    for (int64_t row = kb; row < ke; row += gemv_batch) {
      RowBits<Int4, 8> codes[gemv_batch];
#pragma unroll
      for (int u = 0; u < gemv_batch; ++u) codes[u].load(values + ((row + u) * n + n0) / (Int4 ? 2 : 1));
      const int64_t g = row / group;
      float s[8], z[8];
      load_bf16x8(scales + g * n + n0, s);
      if (zeros != nullptr) load_bf16x8(zeros + g * n + n0, z);
      float x[M][gemv_batch];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (m < m_rows) detail::load_f32<TA, gemv_batch>(a + static_cast<int64_t>(m) * k + row, x[m]);
        else
#pragma unroll
          for (int u = 0; u < gemv_batch; ++u) x[m][u] = 0.0f;
      }
      float dot[M][8], xsum[M];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        xsum[m] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) dot[m][j] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < gemv_batch; ++u) {
        float v[8];
        widen<Int4>(codes[u], v);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          xsum[m] += x[m][u];
#pragma unroll
          for (int j = 0; j < 8; ++j) dot[m][j] = fmaf(x[m][u], v[j], dot[m][j]);
        }
      }
      // Σ x·(q − zero)·s over the batch.
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float xq = Int4 ? 128.0f * (dot[m][j] - xsum[m]) : dot[m][j];
          const float zero = zeros != nullptr ? z[j] : 0.0f;
          acc[m][j] = fmaf(s[j], xq - zero * xsum[m], acc[m][j]);
        }
    }
  }

  sum_tile_into_c<M>(acc, m_rows, col0, n, c, c_type, accumulate);
}

// One warp's pipeline stage in shared memory: a batch of 8 rows of the tile's codes and the 8
// values of each row of A over them.
template <class TA, int M, bool Int4>
struct WarpStage {
  static constexpr int row_bytes = Int4 ? gemv_tile / 2 : gemv_tile;
  static constexpr int code_bytes = gemv_batch * row_bytes;
  static constexpr int a_chunks = gemv_batch * static_cast<int>(sizeof(TA)) / 16;  // per row of A
  static constexpr int bytes = code_bytes + M * a_chunks * 16;
  // Batches a warp has in flight (one more is being summed): as deep as two CTAs a SM allow.
  static constexpr int stages = Int4 ? 4 : 2;
  static constexpr std::size_t smem = static_cast<std::size_t>(gemv_warps<M>) * stages * bytes;
  static_assert(M * a_chunks <= 32, "a lane a chunk of A");
};

// blockIdx.x: 256 columns; blockIdx.y: a slice of K, split among the warps in chunks of whole
// batches of 8 rows. Each warp streams its chunk through its own stages in shared memory
// (cp.async, `stages` − 1 batches in flight: the bytes in flight need no registers), each lane
// then sums its 8 columns over a batch (x·v per column, Σ x) and folds the batch into its sums
// with the group's scales and zeros. The warps' sums meet in shared memory; the cluster's CTAs
// (the slices of this column tile) each add up a share of the tile over all of them into C.
template <class TA, int M, bool Int4>
__global__ void __launch_bounds__(32 * gemv_warps<M>)
    quantized_gemv_kernel(const TA* __restrict__ a, int m_rows, const uint8_t* __restrict__ values,
                          const __nv_bfloat16* __restrict__ scales, const __nv_bfloat16* __restrict__ zeros, int64_t k,
                          int64_t n, int64_t group, int64_t k_per_split, void* c, int c_type, bool accumulate) {
  using S = WarpStage<TA, M, Int4>;
  constexpr int warps = gemv_warps<M>;
  extern __shared__ __align__(16) uint8_t stage_smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  uint8_t* stages = stage_smem + static_cast<std::size_t>(warp) * S::stages * S::bytes;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * gemv_tile, n0 = col0 + lane * 8;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * k_per_split, k1 = min(k, k0 + k_per_split);
  const int64_t per_warp = (k_per_split / warps + gemv_batch - 1) / gemv_batch * gemv_batch;
  const int64_t kb = k0 + warp * per_warp, ke = min(k1, kb + per_warp);
  const int batches = ke > kb ? static_cast<int>((ke - kb) / gemv_batch) : 0;

  auto issue = [&](int b) {
    if (b < batches) {
      uint8_t* buf = stages + (b % S::stages) * S::bytes;
      const int64_t row0 = kb + static_cast<int64_t>(b) * gemv_batch;
      constexpr int per_row = S::row_bytes / 16, per_chunk = Int4 ? 32 : 16;  // chunks a row, columns a chunk
#pragma unroll
      for (int i = lane; i < gemv_batch * per_row; i += 32) {
        const int r = i / per_row, ch = i % per_row;
        const int64_t col = col0 + ch * per_chunk;
        const bool ok = col < n;
        const int64_t at = (row0 + r) * n + (ok ? col : 0);
        attn_detail::cp_async_16(buf + r * S::row_bytes + ch * 16, values + (Int4 ? at / 2 : at), ok);
      }
      if (lane < M * S::a_chunks) {
        const int m = lane / S::a_chunks, ch = lane % S::a_chunks;
        const bool ok = m < m_rows;
        attn_detail::cp_async_16(buf + S::code_bytes + lane * 16,
                                 a + static_cast<int64_t>(ok ? m : 0) * k + row0 + ch * (16 / sizeof(TA)), ok);
      }
    }
    attn_detail::cp_async_commit();  // an empty group past the end keeps the count
  };

  float acc[M][8];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.0f;

  const bool live = n0 < n;
#pragma unroll
  for (int b = 0; b < S::stages - 1; ++b) issue(b);
  float s[8], z[8];
  int64_t group_end = -1;
  for (int b = 0; b < batches; ++b) {
    issue(b + S::stages - 1);
    const int64_t row0 = kb + static_cast<int64_t>(b) * gemv_batch;
    if (live && row0 >= group_end) {  // a new group's scales (and zeros), once per group
      const int64_t g = row0 / group;
      group_end = (g + 1) * group;
      load_bf16x8(scales + g * n + n0, s);
      if (zeros != nullptr) load_bf16x8(zeros + g * n + n0, z);
    }
    attn_detail::cp_async_wait<S::stages - 1>();
    __syncwarp();  // the other lanes' copies of this batch are complete too
    const uint8_t* buf = stages + (b % S::stages) * S::bytes;
    if (live) {
      float x[M][gemv_batch];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (m < m_rows) detail::load_f32<TA, gemv_batch>(reinterpret_cast<const TA*>(buf + S::code_bytes) + m * gemv_batch, x[m]);
        else
#pragma unroll
          for (int u = 0; u < gemv_batch; ++u) x[m][u] = 0.0f;
      }
      float dot[M][8], xsum[M];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        xsum[m] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) dot[m][j] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < gemv_batch; ++u) {
        RowBits<Int4, 8> codes;
        codes.load_shared(buf + u * S::row_bytes + lane * RowBits<Int4, 8>::bytes);
        float v[8];
        widen<Int4>(codes, v);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          xsum[m] += x[m][u];
#pragma unroll
          for (int j = 0; j < 8; ++j) dot[m][j] = fmaf(x[m][u], v[j], dot[m][j]);
        }
      }
      // Σ x·(q − zero)·s over the batch.
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float xq = Int4 ? 128.0f * (dot[m][j] - xsum[m]) : dot[m][j];
          const float zero = zeros != nullptr ? z[j] : 0.0f;
          acc[m][j] = fmaf(s[j], xq - zero * xsum[m], acc[m][j]);
        }
    }
    __syncwarp();  // every lane is done with this buffer before it is refilled
  }
  attn_detail::cp_async_wait<0>();

  sum_tile_into_c<M>(acc, m_rows, col0, n, c, c_type, accumulate);
}

template <class TA, int M, bool Int4>
void launch_gemv(const void* a, int64_t m, const QuantWeightView& w, int64_t splits, void* c, Elem c_type,
                 bool accumulate, cudaStream_t stream) {
  using S = WarpStage<TA, M, Int4>;
  // Only the kernel of this format is instantiated: int4's pipelined one, int8's direct one.
  const auto kernel = [] {
    if constexpr (Int4) return quantized_gemv_kernel<TA, M, Int4>;
    else return quantized_gemv_direct_kernel<TA, M, Int4>;
  }();
  const std::size_t smem = Int4 ? S::smem : 0;
  // Once per kernel: its stages' shared memory (beyond 48 KiB), all of L1 as shared memory (two
  // CTAs a SM), clusters of 16 CTAs (Hopper's non-portable size).
  static const bool configured = [&] {
    PERFSIM_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
    PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return true;
  }();
  (void)configured;
  const auto* values = static_cast<const uint8_t*>(w.data);
  const auto* scales = reinterpret_cast<const __nv_bfloat16*>(values + w.scale_offset);
  const auto* zeros = w.zeros ? reinterpret_cast<const __nv_bfloat16*>(values + w.zero_offset) : nullptr;
  const int64_t rows = gemv_warps<M> * gemv_batch;  // a slice: whole batches for every warp
  const int64_t k_per_split = ((w.k + splits - 1) / splits + rows - 1) / rows * rows;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>((w.n + gemv_tile - 1) / gemv_tile), static_cast<unsigned>(splits));
  cfg.blockDim = dim3(32 * gemv_warps<M>);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = static_cast<unsigned>(splits);
  cluster.val.clusterDim.z = 1;
  cfg.attrs = &cluster;
  cfg.numAttrs = 1;
  const int type = c_type == Elem::f32 ? 0 : c_type == Elem::bf16 ? 1 : 2;
  PERFSIM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<const TA*>(a), static_cast<int>(m), values, scales,
                                        zeros, w.k, w.n, w.group, k_per_split, c, type, accumulate));
}

// blockIdx.y (strided): rows of the weight; each thread 8 columns.
template <class TO, bool Int4>
__global__ void dequantize_kernel(const uint8_t* __restrict__ values, const __nv_bfloat16* __restrict__ scales,
                                  const __nv_bfloat16* __restrict__ zeros, int64_t k, int64_t n, int64_t group,
                                  TO* __restrict__ out) {
  constexpr int C = dequant_cols;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * C;
  if (n0 >= n) return;
  for (int64_t row = blockIdx.y; row < k; row += gridDim.y) {
    const int64_t g = row / group;
    float s[C], zs[C], w[C];
    load_bf16x8(scales + g * n + n0, s);
    if (zeros != nullptr) load_bf16x8(zeros + g * n + n0, zs);
#pragma unroll
    for (int c = 0; c < C; ++c) zs[c] = zeros != nullptr ? zs[c] * s[c] : 0.0f;
    RowBits<Int4, C> bits;
    bits.load(values + (row * n + n0) / (Int4 ? 2 : 1));
    bits.dequantize(s, zs, w);
    detail::store_f32<TO, C>(out + row * n + n0, w);
  }
}

// Any shape: one element a thread (n not a multiple of 8).
template <class TO>
__global__ void dequantize_scalar_kernel(const uint8_t* __restrict__ values, const __nv_bfloat16* __restrict__ scales,
                                         const __nv_bfloat16* __restrict__ zeros, int64_t k, int64_t n, int64_t group,
                                         bool int4, TO* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < k * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / n, col = i % n, g = (row / group) * n + col;
    const float q = int4 ? static_cast<float>(i % 2 == 0 ? values[i / 2] & 0xF : values[i / 2] >> 4)
                         : static_cast<float>(static_cast<int8_t>(values[i]));
    const float zero = zeros != nullptr ? __bfloat162float(zeros[g]) : 0.0f;
    out[i] = from_f32<TO>((q - zero) * __bfloat162float(scales[g]));
  }
}

template <class TO>
void launch_dequantize(const QuantWeightView& w, void* out, cudaStream_t stream) {
  const auto* values = static_cast<const uint8_t*>(w.data);
  const auto* scales = reinterpret_cast<const __nv_bfloat16*>(values + w.scale_offset);
  const auto* zeros = w.zeros ? reinterpret_cast<const __nv_bfloat16*>(values + w.zero_offset) : nullptr;
  auto* o = static_cast<TO*>(out);
  const bool vectors = w.n % dequant_cols == 0 && w.scale_offset % 16 == 0 && (!w.zeros || w.zero_offset % 16 == 0) &&
                       detail::aligned(16, w.data, o);
  if (vectors) {
    const int threads = 128;
    const dim3 grid(static_cast<unsigned>((w.n / dequant_cols + threads - 1) / threads),
                    static_cast<unsigned>(std::min<int64_t>(w.k, 65535)));
    if (w.int4) dequantize_kernel<TO, true><<<grid, threads, 0, stream>>>(values, scales, zeros, w.k, w.n, w.group, o);
    else dequantize_kernel<TO, false><<<grid, threads, 0, stream>>>(values, scales, zeros, w.k, w.n, w.group, o);
  } else {
    dequantize_scalar_kernel<TO><<<detail::grid_for(w.k * w.n, 256), 256, 0, stream>>>(values, scales, zeros, w.k, w.n,
                                                                                     w.group, w.int4, o);
  }
  PERFSIM_CUDA_CHECK(cudaGetLastError());
}

template <class TA>
__global__ void quantize_rows_kernel(const TA* __restrict__ a, int64_t k, int8_t* __restrict__ q,
                                     float* __restrict__ row_scales) {
  const TA* row = a + static_cast<int64_t>(blockIdx.x) * k;
  float amax = 0;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) amax = fmaxf(amax, fabsf(to_f32(row[i])));
  amax = detail::block_max(amax);
  const float scale = amax / 127.0f;
  if (threadIdx.x == 0) row_scales[blockIdx.x] = amax > 0 ? scale : 0.0f;
  int8_t* out = q + static_cast<int64_t>(blockIdx.x) * k;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x)
    out[i] = amax > 0 ? static_cast<int8_t>(fminf(fmaxf(rintf(to_f32(row[i]) / scale), -127.0f), 127.0f)) : 0;
}

template <class TC>
__global__ void scale_product_kernel(const int32_t* __restrict__ acc, const float* __restrict__ row_scales,
                                     const __nv_bfloat16* __restrict__ col_scales, int64_t m, int64_t n, TC* c,
                                     bool accumulate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = static_cast<float>(acc[i]) * row_scales[i / n] * __bfloat162float(col_scales[i % n]);
    c[i] = from_f32<TC>(accumulate ? to_f32(c[i]) + v : v);
  }
}

template <template <class> class Launch, class... Args>
void by_float_type(Elem e, const char* who, Args&&... args) {
  switch (e) {
    case Elem::f32: Launch<float>::run(args...); return;
    case Elem::bf16: Launch<__nv_bfloat16>::run(args...); return;
    case Elem::f16: Launch<__half>::run(args...); return;
    default: throw std::logic_error(std::string(who) + ": operands must be f32, bf16 or f16");
  }
}

template <class TA> struct GemvLaunch {
  static void run(const void* a, int64_t m, const QuantWeightView& w, int64_t splits, void* c, Elem c_type,
                  bool accumulate, cudaStream_t stream) {
    if (m <= 1) by_bits<1>(a, m, w, splits, c, c_type, accumulate, stream);
    else if (m <= 2) by_bits<2>(a, m, w, splits, c, c_type, accumulate, stream);
    else if (m <= 4) by_bits<4>(a, m, w, splits, c, c_type, accumulate, stream);
    else by_bits<8>(a, m, w, splits, c, c_type, accumulate, stream);
  }
  template <int M>
  static void by_bits(const void* a, int64_t m, const QuantWeightView& w, int64_t splits, void* c, Elem c_type,
                      bool accumulate, cudaStream_t stream) {
    if (w.int4) launch_gemv<TA, M, true>(a, m, w, splits, c, c_type, accumulate, stream);
    else launch_gemv<TA, M, false>(a, m, w, splits, c, c_type, accumulate, stream);
  }
};
template <class TO> struct DequantLaunch {
  static void run(const QuantWeightView& w, void* out, cudaStream_t stream) { launch_dequantize<TO>(w, out, stream); }
};
template <class TA> struct QuantizeRowsLaunch {
  static void run(const void* a, int64_t m, int64_t k, int8_t* q, float* row_scales, cudaStream_t stream) {
    quantize_rows_kernel<TA><<<static_cast<unsigned>(m), 256, 0, stream>>>(static_cast<const TA*>(a), k, q, row_scales);
    PERFSIM_CUDA_CHECK(cudaGetLastError());
  }
};
template <class TC> struct ScaleLaunch {
  static void run(const int32_t* acc, const float* row_scales, const void* col_scales, int64_t m, int64_t n, void* c,
                  bool accumulate, cudaStream_t stream) {
    scale_product_kernel<TC><<<detail::grid_for(m * n, 256), 256, 0, stream>>>(
        acc, row_scales, static_cast<const __nv_bfloat16*>(col_scales), m, n, static_cast<TC*>(c), accumulate);
    PERFSIM_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace

int64_t quantized_gemv_splits_here(int64_t n, int64_t k) { return quantized_gemv_splits(n, k, detail::sm_count()); }

bool quantized_gemv_fits(const QuantWeightView& w, int64_t m) {
  return quantized_gemv_takes(m, w.n, w.k, w.group) && w.scale_offset % 16 == 0 &&
         (!w.zeros || w.zero_offset % 16 == 0) && detail::aligned(16, w.data);
}

void quantized_gemv(const void* a, Elem a_type, int64_t m, const QuantWeightView& w, int64_t splits, void* c,
                    Elem c_type, bool accumulate, cudaStream_t stream) {
  if (m <= 0 || w.n <= 0) return;
  if (!quantized_gemv_fits(w, m) || !detail::aligned(16, a) || splits < 1 || splits > quantized_gemv_max_splits)
    throw std::logic_error("quantized_gemv: a weight, A or split the fused kernel does not take");
  if (c_type != Elem::f32 && c_type != Elem::bf16 && c_type != Elem::f16)
    throw std::logic_error("quantized_gemv: C must be f32, bf16 or f16");
  by_float_type<GemvLaunch>(a_type, "quantized_gemv", a, m, w, splits, c, c_type, accumulate, stream);
  PERFSIM_CUDA_CHECK(cudaGetLastError());
}

void dequantize_weight(const QuantWeightView& w, void* out, Elem out_type, cudaStream_t stream) {
  if (w.k * w.n <= 0) return;
  by_float_type<DequantLaunch>(out_type, "dequantize_weight", w, out, stream);
}

void quantize_rows_int8(const void* a, Elem a_type, int64_t m, int64_t k, int8_t* q, float* row_scales,
                        cudaStream_t stream) {
  if (m <= 0 || k <= 0) return;
  by_float_type<QuantizeRowsLaunch>(a_type, "quantize_rows_int8", a, m, k, q, row_scales, stream);
}

void scale_int8_product(const int32_t* acc, const float* row_scales, const void* col_scales, int64_t m, int64_t n,
                        void* c, Elem c_type, bool accumulate, cudaStream_t stream) {
  if (m * n <= 0) return;
  by_float_type<ScaleLaunch>(c_type, "scale_int8_product", acc, row_scales, col_scales, m, n, c, accumulate, stream);
}

}  // namespace perfsim::cuda
