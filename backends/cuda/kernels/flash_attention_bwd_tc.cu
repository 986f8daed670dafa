// Flash attention backward main pass on tensor cores (FlashAttention-2, Dao 2023, Alg. 2),
// bf16/fp16 with head_dim 64 or 128: dK, dV of one kv tile per CTA and its share of dQ.
// Q, dO [b, seq_q, H, d]; K, V [b, kv_capacity, Hkv, d]; dK, dV [b, grad_capacity, Hkv, d];
// LSE, D [b, H, seq_q] fp32; dQ accumulators [b, seq_q, H, d] fp32 (zeroed by the caller).
//
// One CTA of NW warps per (kv tile of BN = 16·NW rows, kv head, batch), or with a split GQA
// group (p.dkv_acc) per (kv tile, query head, batch); warp w owns kv rows 16w..16w+15. K and V
// stay in shared memory; the CTA walks every 64-row query tile of every head of its GQA group
// (dK/dV come out summed over the group without a second pass), or of its one query head and
// adds its dK/dV into the group's fp32 accumulators with float2 atomics (a group's CTAs run
// side by side: a few kv heads over short sequences would leave SMs idle), skipping query
// tiles the causal mask hides from the whole kv tile. Q, dO, LSE and D tiles
// stream in by cp.async, double-buffered. Per query tile, with mma.sync m16n8k16 (fp32
// accumulation) on ldmatrix operands from swizzled shared memory (16-byte chunk c of row r
// at c ^ (r & 7), as the forward):
//   S^T = K·Q^T, dP^T = V·dO^T            [16 kv, 64 q] per warp
//   P^T = exp2(S^T·scale·log2e − LSE·log2e), dS^T = P^T ⊙ (dP^T − D)   (masked to 0)
//   dV += P^T·dO, dK += dS^T·Q            A operands straight from the accumulators
//   dS^T -> shared memory; dQ += scale·dS·K per (16 query rows, d slice) of each warp,
//   added to the fp32 accumulators with float2 atomics (summation order varies run to run
//   at fp32 rounding level).
// dK is scaled once at the end; rows of dK/dV >= seq_kv come out as 0 (P and dS are
// masked there).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/flash_attention_bwd_detail.cuh"
#include "core/errors.hpp"

namespace perfsim::cuda::flash_bwd_detail {

using namespace attn_detail;

namespace {

constexpr int k_bm = 64;  // query rows per tile

// Element offset of 16-byte chunk `ch` of row `row` in a swizzled [rows, D] tile.
template <int D>
__device__ __forceinline__ int swz(int row, int ch) {
  return row * D + ((ch ^ (row & 7)) << 3);
}

// 4-byte global -> shared copy (zeros when !valid), for the per-row LSE and D values.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

// cp.async of R rows × D columns (row stride `stride` elements) into a swizzled tile;
// rows >= valid are filled with zeros.
template <class T, int D, int R, int NT>
__device__ __forceinline__ void load_rows(T* s, const T* g, int64_t stride, int valid, int tid) {
  constexpr int chunks_per_row = D / 8;
#pragma unroll
  for (int c = tid; c < R * chunks_per_row; c += NT) {
    const int row = c / chunks_per_row, ch = c % chunks_per_row;
    const bool ok = row < valid;
    cp_async_16(s + swz<D>(row, ch), g + (ok ? row : 0) * stride + ch * 8, ok);
  }
}

template <class T, int D, int NW>
__global__ void __launch_bounds__(NW * 32, NW == 4 ? 2 : 1) flash_bwd_tc_kernel(BwdParams p) {
  constexpr int BN = 16 * NW, BM = k_bm, NT = NW * 32;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* k_s = reinterpret_cast<T*>(smem_raw);  // [BN, D]
  T* v_s = k_s + BN * D;                    // [BN, D]
  T* q_s = v_s + BN * D;                    // [2, BM, D]
  T* do_s = q_s + 2 * BM * D;               // [2, BM, D]
  T* ds_s = do_s + 2 * BM * D;              // [BN, BM]: dS^T of the current query tile
  float* lse_s = reinterpret_cast<float*>(ds_s + BN * BM);  // [2, BM]
  float* dlt_s = lse_s + 2 * BM;                            // [2, BM]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t4 = lane % 4;
  const bool split = p.dkv_acc != nullptr;
  const int j0 = blockIdx.x * BN, b = blockIdx.z;
  const int kh = split ? blockIdx.y / p.group : blockIdx.y;     // kv head
  const int h_first = split ? blockIdx.y : kh * p.group;        // first query head walked
  const int heads_walked = split ? 1 : p.group;
  const int kv_valid = max(0, min(BN, p.seq_kv - j0));
  const int64_t q_stride = int64_t(p.heads) * D, kv_stride = int64_t(p.kv_heads) * D;
  const int diag = p.seq_kv - p.seq_q;  // query i sees kv j <= diag + i
  // Causal: query tiles before the first row that sees kv j0 contribute nothing.
  // Tiles wholly before q_first (a ring-attention block's skipped rows) too.
  const int m_first = max(p.causal ? max(0, j0 - diag) / BM : 0, p.q_first / BM);
  const int m_tiles = (p.seq_q + BM - 1) / BM;
  const int n_m = kv_valid > 0 ? max(0, m_tiles - m_first) : 0;
  const int total = n_m * heads_walked;  // (query head, query tile) pairs

  const T* q = static_cast<const T*>(p.q);
  const T* d_o = static_cast<const T*>(p.d_o);
  auto load_q_tile = [&](int t, int buf) {
    const int h = h_first + t / n_m, i0 = (m_first + t % n_m) * BM;
    const int rows = min(BM, p.seq_q - i0);
    const int64_t off = ((int64_t(b) * p.seq_q + i0) * p.heads + h) * D;
    load_rows<T, D, BM, NT>(q_s + buf * BM * D, q + off, q_stride, rows, tid);
    load_rows<T, D, BM, NT>(do_s + buf * BM * D, d_o + off, q_stride, rows, tid);
    const int64_t loff = (int64_t(b) * p.heads + h) * p.seq_q + i0;
    for (int r = tid; r < BM; r += NT) {
      const bool ok = r < rows;
      cp_async_4(lse_s + buf * BM + r, p.lse + loff + (ok ? r : 0), ok);
      cp_async_4(dlt_s + buf * BM + r, p.delta + loff + (ok ? r : 0), ok);
    }
  };

  if (total > 0) {
    const int64_t kv_off = (int64_t(b) * p.kv_capacity + j0) * p.kv_heads + kh;
    load_rows<T, D, BN, NT>(k_s, static_cast<const T*>(p.k) + kv_off * D, kv_stride, kv_valid, tid);
    load_rows<T, D, BN, NT>(v_s, static_cast<const T*>(p.v) + kv_off * D, kv_stride, kv_valid, tid);
    load_q_tile(0, 0);
  }
  cp_async_commit();

  float dv_acc[D / 8][4], dk_acc[D / 8][4];
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) dv_acc[nb][e] = dk_acc[nb][e] = 0.f;

  const float scale_log2 = p.scale * k_log2e;
  const int wrow = warp * 16;  // this warp's first kv row in the tile

  for (int t = 0; t < total; ++t) {
    cp_async_wait<0>();
    __syncthreads();  // tile t landed; every warp is done with buffer (t+1)&1 and ds_s
    if (t + 1 < total) load_q_tile(t + 1, (t + 1) & 1);
    cp_async_commit();
    const int buf = t & 1;
    const T* qt = q_s + buf * BM * D;
    const T* dot = do_s + buf * BM * D;
    const float* lse_t = lse_s + buf * BM;
    const float* dlt_t = dlt_s + buf * BM;
    const int h = h_first + t / n_m, i0 = (m_first + t % n_m) * BM;

    // S^T = K·Q^T and dP^T = V·dO^T for this warp's 16 kv rows: [BM/8 n-blocks][4]
    float st[BM / 8][4], dpt[BM / 8][4];
#pragma unroll
    for (int nb = 0; nb < BM / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nb][e] = dpt[nb][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[4], va[4];
      ldmatrix_x4(ka, k_s + swz<D>(wrow + lane % 16, kk * 2 + lane / 16));
      ldmatrix_x4(va, v_s + swz<D>(wrow + lane % 16, kk * 2 + lane / 16));
#pragma unroll
      for (int np = 0; np < BM / 16; ++np) {
        uint32_t qb[4], ob[4];
        const int off = swz<D>(np * 16 + lane % 8 + (lane / 16) * 8, kk * 2 + (lane / 8) % 2);
        ldmatrix_x4(qb, qt + off);
        ldmatrix_x4(ob, dot + off);
        mma_16816<T>(st[2 * np], ka, qb[0], qb[1]);
        mma_16816<T>(st[2 * np + 1], ka, qb[2], qb[3]);
        mma_16816<T>(dpt[2 * np], va, ob[0], ob[1]);
        mma_16816<T>(dpt[2 * np + 1], va, ob[2], ob[3]);
      }
    }

    // P^T and dS^T in place; masking only on tiles crossing seq_kv, seq_q, q_first or the diagonal
    // (a row whose LSE is -inf sees nothing, so it always falls in a masked tile).
    const bool edge = j0 + BN > p.seq_kv || i0 + BM > p.seq_q || i0 < p.q_first ||
                      (p.causal && j0 + BN - 1 > diag + i0);
#pragma unroll
    for (int nb = 0; nb < BM / 8; ++nb) {
      const int col = nb * 8 + 2 * t4;
      const float2 l2 = *reinterpret_cast<const float2*>(lse_t + col);
      const float2 dd = *reinterpret_cast<const float2*>(dlt_t + col);
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float lse_l2 = (e ? l2.y : l2.x) * k_log2e;
          float pv = exp2f(fmaf(st[nb][2 * hh + e], scale_log2, -lse_l2));
          if (edge) {
            const int j = j0 + wrow + g + 8 * hh, i = i0 + col + e;
            if (j >= p.seq_kv || i >= p.seq_q || i < p.q_first || (p.causal && j > diag + i)) pv = 0.f;
          }
          st[nb][2 * hh + e] = pv;
          dpt[nb][2 * hh + e] = pv * (dpt[nb][2 * hh + e] - (e ? dd.y : dd.x));
        }
    }

    // dS^T to shared memory for the dQ step (conflict-free: the swizzle spreads 8 rows).
#pragma unroll
    for (int nb = 0; nb < BM / 8; ++nb)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
        *reinterpret_cast<uint32_t*>(ds_s + swz<BM>(wrow + g + 8 * hh, nb) + 2 * t4) =
            pack2<T>(dpt[nb][2 * hh], dpt[nb][2 * hh + 1]);

    // dV += P^T·dO, dK += dS^T·Q: accumulator layout of P^T/dS^T is the A-fragment layout.
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t pa[4], sa[4];
      pa[0] = pack2<T>(st[2 * kk][0], st[2 * kk][1]);
      pa[1] = pack2<T>(st[2 * kk][2], st[2 * kk][3]);
      pa[2] = pack2<T>(st[2 * kk + 1][0], st[2 * kk + 1][1]);
      pa[3] = pack2<T>(st[2 * kk + 1][2], st[2 * kk + 1][3]);
      sa[0] = pack2<T>(dpt[2 * kk][0], dpt[2 * kk][1]);
      sa[1] = pack2<T>(dpt[2 * kk][2], dpt[2 * kk][3]);
      sa[2] = pack2<T>(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]);
      sa[3] = pack2<T>(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t ob[4], qb[4];
        const int off = swz<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16);
        ldmatrix_x4_trans(ob, dot + off);
        ldmatrix_x4_trans(qb, qt + off);
        mma_16816<T>(dv_acc[2 * dp], pa, ob[0], ob[1]);
        mma_16816<T>(dv_acc[2 * dp + 1], pa, ob[2], ob[3]);
        mma_16816<T>(dk_acc[2 * dp], sa, qb[0], qb[1]);
        mma_16816<T>(dk_acc[2 * dp + 1], sa, qb[2], qb[3]);
      }
    }
    __syncthreads();  // ds_s holds every warp's rows

    // dQ[16 query rows of slice qs, columns c_begin..+DW] += scale·dS·K, DC columns at a
    // time to bound registers. dS comes from ds_s (stored transposed) via ldmatrix.trans.
    constexpr int WPS = NW / 4;  // warps per 16-row query slice
    constexpr int DW = D / WPS;
    constexpr int DC = DW < 64 ? DW : 64;
    const int qs = warp % 4, c_begin = (warp / 4) * DW;
    float* dq = p.dq_acc + ((int64_t(b) * p.seq_q + i0) * p.heads + h) * D;
#pragma unroll
    for (int ci = 0; ci < DW / DC; ++ci) {
      const int c0 = c_begin + ci * DC;
      float acc[DC / 8][4];
#pragma unroll
      for (int nb = 0; nb < DC / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nb][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[4];
        ldmatrix_x4_trans(a, ds_s + swz<BM>(kk * 16 + lane % 8 + (lane / 16) * 8, qs * 2 + (lane / 8) % 2));
#pragma unroll
        for (int dp = 0; dp < DC / 16; ++dp) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, k_s + swz<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8,
                                             c0 / 8 + dp * 2 + lane / 16));
          mma_16816<T>(acc[2 * dp], a, kb[0], kb[1]);
          mma_16816<T>(acc[2 * dp + 1], a, kb[2], kb[3]);
        }
      }
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = qs * 16 + g + 8 * hh;
        if (i0 + row >= p.seq_q) continue;
        float* dq_row = dq + row * q_stride + c0 + 2 * t4;
#pragma unroll
        for (int nb = 0; nb < DC / 8; ++nb)
          atomicAdd(reinterpret_cast<float2*>(dq_row + nb * 8),
                    make_float2(acc[nb][2 * hh] * p.scale, acc[nb][2 * hh + 1] * p.scale));
      }
    }
  }
  cp_async_wait<0>();

  // dK = scale·Σ dS^T·Q, dV = Σ P^T·dO for this warp's rows (0 past seq_kv).
  const int64_t g_off = ((int64_t(b) * p.grad_capacity + j0) * p.kv_heads + kh) * D;
  const int64_t kv_elems = int64_t(gridDim.z) * p.grad_capacity * p.kv_heads * D;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = wrow + g + 8 * hh;
    if (j0 + r >= p.grad_capacity) continue;
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb) {
      const int64_t e = g_off + r * kv_stride + nb * 8 + 2 * t4;
      if (split) {
        atomicAdd(reinterpret_cast<float2*>(p.dkv_acc + e),
                  make_float2(dk_acc[nb][2 * hh] * p.scale, dk_acc[nb][2 * hh + 1] * p.scale));
        atomicAdd(reinterpret_cast<float2*>(p.dkv_acc + kv_elems + e),
                  make_float2(dv_acc[nb][2 * hh], dv_acc[nb][2 * hh + 1]));
      } else {
        *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dk) + e) =
            pack2<T>(dk_acc[nb][2 * hh] * p.scale, dk_acc[nb][2 * hh + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dv) + e) = pack2<T>(dv_acc[nb][2 * hh], dv_acc[nb][2 * hh + 1]);
      }
    }
  }
}

template <class T, int D, int NW>
void launch(const BwdParams& p, int batch, cudaStream_t stream) {
  constexpr int BN = 16 * NW;
  constexpr int smem = (2 * BN * D + 4 * k_bm * D + BN * k_bm) * int(sizeof(T)) + 4 * k_bm * 4;
  auto kernel = flash_bwd_tc_kernel<T, D, NW>;
  PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int heads = p.dkv_acc != nullptr ? p.heads : p.kv_heads;  // CTAs per (kv tile, batch)
  const dim3 grid(unsigned((p.grad_capacity + BN - 1) / BN), unsigned(heads), unsigned(batch));
  kernel<<<grid, NW * 32, smem, stream>>>(p);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T, int D>
void launch_d(const BwdParams& p, int batch, int block_n, cudaStream_t stream) {
  // Default from measurement on an H100 (docs/PERFORMANCE.md): at d = 128 the 128-row kv
  // tile (8 warps, half the dQ atomics per flop) runs 5-11% faster; at d = 64 the two are
  // within 1%, and the 64-row tile (2 CTAs per SM) is kept.
  if (block_n == 0) block_n = D == 128 ? 128 : 64;
  if (block_n == 64) launch<T, D, 4>(p, batch, stream);
  else if (block_n == 128) launch<T, D, 8>(p, batch, stream);
  else throw ConfigError("flash_attention_bwd: block_n must be 64 or 128, got " + std::to_string(block_n));
}

}  // namespace

template <class T> bool bwd_tc_supported(int head_dim) {
  if constexpr (__is_same(T, float)) return false;
  else return head_dim == 64 || head_dim == 128;
}

template <class T>
void flash_bwd_tc(const BwdParams& p, int batch, int block_n, cudaStream_t stream) {
  if constexpr (!__is_same(T, float)) {
    if (p.d == 64) return launch_d<T, 64>(p, batch, block_n, stream);
    if (p.d == 128) return launch_d<T, 128>(p, batch, block_n, stream);
  }
  throw ConfigError("flash_attention_bwd: no tensor-core kernel for head_dim " + std::to_string(p.d));
}

template bool bwd_tc_supported<float>(int);
template bool bwd_tc_supported<__nv_bfloat16>(int);
template bool bwd_tc_supported<__half>(int);
template void flash_bwd_tc<float>(const BwdParams&, int, int, cudaStream_t);
template void flash_bwd_tc<__nv_bfloat16>(const BwdParams&, int, int, cudaStream_t);
template void flash_bwd_tc<__half>(const BwdParams&, int, int, cudaStream_t);

}  // namespace perfsim::cuda::flash_bwd_detail
