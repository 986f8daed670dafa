// Flash attention forward (FlashAttention-2, Dao 2023, Alg. 1), O and LSE from Q, K, V.
// Q [b, seq_q, H, d]; K, V [b, kv_capacity, Hkv, d] (first seq_kv rows read); O like Q;
// LSE [b, H, seq_q] fp32. Semantics of cpu::flash_attention (GQA, causal, -inf LSE and zero
// O for a row that sees nothing, as the rows before q_first do).
//
// Tensor-core path (bf16/fp16, d in {64, 128}): one CTA of 4 warps per (query tile of
// 64·WM rows, head, batch); each warp owns WM slices of 16 query rows. K/V tiles of 64 rows
// stream through shared memory by cp.async, double-buffered (tile t+1 loads while tile t is
// computed). S = Q·K^T and O += P·V are mma.sync m16n8k16 with fp32 accumulators; operands
// come from shared memory through ldmatrix (V with .trans), rows swizzled (16-byte chunk c
// of row r stored at c ^ (r & 7)) so the 8 rows an ldmatrix reads hit 8 distinct bank
// groups. P never leaves registers: the S accumulator layout is the A-operand layout of
// the next mma. Online softmax in the log2 domain (exp2 with scale·log2(e) folded in).
// Causal: kv tiles past the query tile's last visible position are never loaded; masking
// runs only on tiles crossing the diagonal or seq_kv.
//
// Fallback path (fp32, other d <= 256): one warp per query row, lanes split d; kept simple
// for correctness, not speed.
//
// An fp8 KV cache (K/V stored as __nv_fp8_e4m3 beside bf16/fp16 Q and O, the fp8_kv pass) is
// read as stored: in the tensor-core kernel its tiles land by cp.async as raw bytes (half a
// bf16 tile's, double-buffered) and are widened once per tile into one T tile of K and one of V
// that the mma loop reads as usual (e4m3 -> bf16/fp16 is exact, so the products are those of
// the dequantized cache); the per-row kernel widens element by element. The cache's scale
// folds into the softmax scale (K) and the output's normalization (V).
//
// Both kernels take a row policy saying where a CTA's sequence lies: DenseRows (Q [b, seq_q,
// H, d], K/V [b, kv_capacity, Hkv, d]) or VarlenRows (a serving engine's packed step,
// varlen_attention.cuh: the sequence's queries from query_start, its keys through its block
// table, LSE [H, T]). K/V tile rows are addressed through the policy, so a 64-row tile may span
// pages (vLLM's PagedAttention layout); a thread's rows of tile t+2 share a page (block 16) and
// its table entry is fetched while tile t is computed, so the lookup never stalls the loads.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/varlen_attention.cuh"
#include "core/errors.hpp"

namespace perfsim::cuda {

using namespace attn_detail;

namespace {

struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int heads, kv_heads, group;
  bool causal;
  float scale;    // 1/sqrt(d) times K's scale (kv_scale_of)
  int q_first;    // rows before it see nothing: O 0, LSE −inf (a ring-attention block)
  float v_scale;  // V's scale
  // Packed GQA (decode's split-KV partials, flash_decode_partials): where each split leaves its
  // unnormalized accumulator [splits, b, H, seq_q, d] and (max, denominator) [.., 2], as
  // decode_attention.cu's combine kernel reads them; keys [split·split_len, +split_len).
  float* part_acc = nullptr;
  float* part_ml = nullptr;
  int splits = 1, split_len = 0, batch = 0;
};

// The sequence a CTA works on: its query rows are Q/O rows q_row0.. (of H·d elements), q_len
// of them; LSE of (head h, row i) at lse0 + h·lse_head + i; kv_len keys; `key` says where
// they are for the row policy (the first K/V row, or the sequence's block-table row).
struct SeqView {
  int64_t q_row0, lse0, lse_head, key;
  int q_len, kv_len;
};

// Q [b, seq_q, H, d]; K/V [b, kv_capacity, Hkv, d]; LSE [b, H, seq_q].
struct DenseRows {
  int seq_q, seq_kv;
  int64_t kv_capacity;
  __device__ SeqView seq(int b, int heads) const {
    return {int64_t(b) * seq_q, int64_t(b) * heads * seq_q, seq_q, int64_t(b) * kv_capacity, seq_q, seq_kv};
  }
  // What row() needs of key j that a table holds (nothing here), and whether `n` consecutive
  // keys from a multiple of n share it.
  __device__ int entry(const SeqView&, int j) const { return j; }
  __device__ bool shared_entry(int) const { return true; }
  // K/V row (in units of Hkv·d elements) of key j, given entry(j).
  __device__ int64_t row(const SeqView& s, int, int j) const { return s.key + j; }
};

// Packed sequences (varlen_attention.cuh): sequence first_seq + z, its queries at tokens
// query_start[s].., its keys at page table[s][j / block], row j % block; LSE [H, tokens].
struct VarlenRows {
  const int32_t* table;  // [seqs, max_blocks]
  const int32_t* query_start;
  const int32_t* kv_len;
  int64_t tokens;
  int max_blocks;
  detail::PageDivider pages;
  int first_seq;
  __device__ SeqView seq(int z, int) const {
    const int s = first_seq + z;
    const int q0 = query_start[s];
    return {q0, q0, tokens, int64_t(s) * max_blocks, query_start[s + 1] - q0, kv_len[s]};
  }
  __device__ int entry(const SeqView& s, int j) const { return __ldg(table + s.key + pages.page(j)); }
  __device__ bool shared_entry(int n) const { return pages.block % n == 0; }
  __device__ int64_t row(const SeqView&, int page, int j) const { return pages.row(page, j); }
};

// Q [b, seq_q, H, d] as DenseRows; K/V pages [num_blocks, block, Hkv, d] through table
// [b, max_blocks] (paged_decode_attention's layout); LSE [b, H, seq_q].
struct PagedDenseRows {
  const int32_t* table;
  int seq_q, seq_kv, max_blocks;
  detail::PageDivider pages;
  __device__ SeqView seq(int b, int heads) const {
    return {int64_t(b) * seq_q, int64_t(b) * heads * seq_q, seq_q, int64_t(b) * max_blocks, seq_q, seq_kv};
  }
  __device__ int entry(const SeqView& s, int j) const { return __ldg(table + s.key + pages.page(j)); }
  __device__ bool shared_entry(int n) const { return pages.block % n == 0; }
  __device__ int64_t row(const SeqView&, int page, int j) const { return pages.row(page, j); }
};

constexpr int k_block_n = 64;
constexpr int k_warps = 4;

// Element offset of 16-byte chunk `ch` of row `row` in a swizzled [rows, D] tile.
template <int D>
__device__ __forceinline__ int swz(int row, int ch) {
  return row * D + ((ch ^ (row & 7)) << 3);
}

// cp.async of `R` rows × D columns into a swizzled tile, row r from row_at(r); rows >= valid
// are filled with zeros.
template <class T, int D, int R, class RowAt>
__device__ __forceinline__ void load_tile(T* s, RowAt row_at, int valid, int tid) {
  constexpr int chunks_per_row = D / 8;
#pragma unroll
  for (int c = tid; c < R * chunks_per_row; c += k_warps * 32) {
    const int row = c / chunks_per_row;
    const int ch = c % chunks_per_row;
    const bool ok = row < valid;
    cp_async_16(s + swz<D>(row, ch), row_at(ok ? row : 0) + ch * 8, ok);
  }
}

// Two fp8 e4m3 values (the low byte first) as a pair of T (bf16 or fp16) in one register.
template <class T>
__device__ __forceinline__ uint32_t widen_fp8x2(uint32_t x) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x & 0xffffu), __NV_E4M3);
  if constexpr (std::is_same_v<T, __half>) {
    return uint32_t(h.x) | (uint32_t(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    return pack2<T>(f.x, f.y);
  }
}

// A raw fp8 K/V tile [BN, D] (row-major) widened into the swizzled T tile: 16-byte chunk ch of
// a raw row holds T chunks 2·ch and 2·ch + 1.
template <class T, int D>
__device__ __forceinline__ void widen_tile(const __nv_fp8_e4m3* raw, T* tile, int tid) {
  constexpr int cpr = D / 16;
#pragma unroll
  for (int i = 0; i < k_block_n * cpr / (k_warps * 32); ++i) {
    const int c = tid + i * k_warps * 32, row = c / cpr, ch = c % cpr;
    const uint4 w = *reinterpret_cast<const uint4*>(raw + row * D + ch * 16);
    *reinterpret_cast<uint4*>(tile + swz<D>(row, 2 * ch)) =
        make_uint4(widen_fp8x2<T>(w.x), widen_fp8x2<T>(w.x >> 16), widen_fp8x2<T>(w.y), widen_fp8x2<T>(w.y >> 16));
    *reinterpret_cast<uint4*>(tile + swz<D>(row, 2 * ch + 1)) =
        make_uint4(widen_fp8x2<T>(w.z), widen_fp8x2<T>(w.z >> 16), widen_fp8x2<T>(w.w), widen_fp8x2<T>(w.w >> 16));
  }
}

// Shared memory of the tensor-core kernel: Q [BM, D], K and V tiles [2, BN, D] of T; with an
// fp8 cache, one T tile each plus the raw fp8 tiles [2, BN, D] of K and of V (the same total).
template <class T, class Kv, int D, int WM>
constexpr int tc_smem_bytes() {
  constexpr int BM = 16 * k_warps * WM;
  if constexpr (kv_is_fp8<T, Kv>) return (BM + 2 * k_block_n) * D * int(sizeof(T)) + 4 * k_block_n * D;
  else return (BM + 4 * k_block_n) * D * int(sizeof(T));
}

// Packed: the CTA's rows are the (head, query) pairs of one KV head's GQA group, row r being
// head kh·group + r / seq_q, query r % seq_q, so each K/V tile serves the whole group (decode
// and verify passes: a few queries a sequence); blockIdx.x = query tile · splits + split, and
// the CTA leaves split-KV partials (FwdParams) instead of O and LSE. q_first must be 0.
template <class T, class Kv, int D, int WM, class Rows, bool Packed = false>
__global__ void __launch_bounds__(k_warps * 32, 2) flash_fwd_tc_kernel(FwdParams p, Rows rows) {
  constexpr bool kFp8 = kv_is_fp8<T, Kv>;
  constexpr int BM = 16 * k_warps * WM;
  constexpr int BN = k_block_n;
  constexpr int T_BUFS = kFp8 ? 1 : 2;  // T tiles of K and of V
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);  // [BM, D]
  T* k_s = q_s + BM * D;                    // [T_BUFS, BN, D]
  T* v_s = k_s + T_BUFS * BN * D;           // [T_BUFS, BN, D]
  // Where cp.async lands K/V tiles [2, BN, D]: the T tiles themselves, or raw fp8 ones.
  Kv* k_in = kFp8 ? reinterpret_cast<Kv*>(v_s + T_BUFS * BN * D) : reinterpret_cast<Kv*>(k_s);
  Kv* v_in = kFp8 ? k_in + 2 * BN * D : reinterpret_cast<Kv*>(v_s);
  // Element offset of 16-byte chunk ch of landed row r: swizzled in a T tile, row-major in a raw one.
  auto in_off = [](int r, int ch) { return kFp8 ? r * D + ch * 16 : swz<D>(r, ch); };

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // Non-packed: longest causal tiles first.
  const int m_block = Packed ? int(blockIdx.x) / p.splits : int(gridDim.x - 1 - blockIdx.x);
  const int split = Packed ? int(blockIdx.x) % p.splits : 0;
  const int kh = Packed ? int(blockIdx.y) : int(blockIdx.y) / p.group;
  const SeqView sq = rows.seq(blockIdx.z, p.heads);
  const int seq_q = sq.q_len, seq_kv = sq.kv_len;
  const int tile_rows = Packed ? p.group * seq_q : seq_q;  // rows of all this CTA's tiles
  // Head and query of tile row `row` (counted from the first tile's).
  auto head_of = [&](int row) { return Packed ? kh * p.group + row / seq_q : int(blockIdx.y); };
  auto query_of = [&](int row) { return Packed ? row % seq_q : row; };
  const int i0 = m_block * BM;
  if (i0 >= tile_rows) return;  // a shorter sequence of a packed step
  const int rows_valid = min(BM, tile_rows - i0);

  const int64_t q_stride = int64_t(p.heads) * D;
  const int64_t kv_stride = int64_t(p.kv_heads) * D;
  const T* q = static_cast<const T*>(p.q) + sq.q_row0 * q_stride;
  const Kv* k = static_cast<const Kv*>(p.k) + int64_t(kh) * D;
  const Kv* v = static_cast<const Kv*>(p.v) + int64_t(kh) * D;

  // Causal: the tile's last row sees the most; rows see kv < seq_kv - seq_q + row + 1. A packed
  // tile holds every query of a head, so it reads its split whole and masks the last seq_q keys.
  const int diag = seq_kv - seq_q;  // query row i sees kv < diag + i + 1
  const int kv_lo = Packed ? split * p.split_len : 0;
  const int kv_hi = Packed ? min(seq_kv, kv_lo + p.split_len) : seq_kv;  // keys past it: masked
  const int kv_end = Packed                        ? kv_hi
                     : i0 + rows_valid <= p.q_first ? 0
                     : p.causal                     ? max(0, min(seq_kv, diag + i0 + rows_valid))
                                                    : seq_kv;
  const int mask_from = Packed ? (p.causal ? min(kv_hi, diag + 1) : kv_hi)
                               : (p.causal ? min(seq_kv, diag + i0 + 1) : seq_kv);  // tiles past need masks
  const bool skips_rows = !Packed && i0 < p.q_first;  // rows before q_first are masked whole
  const int n_tiles = kv_end > kv_lo ? (kv_end - kv_lo + BN - 1) / BN : 0;

  // K/V tiles: this thread copies 16-byte chunk kv_ch of the KV_ROWS consecutive tile rows
  // from kv_r0. Where those rows always share a page (block a multiple of KV_ROWS, vLLM's 16),
  // one table entry serves them all, fetched a tile ahead; other blocks look each row up.
  constexpr int KV_PACK = 16 / int(sizeof(Kv));  // elements of a 16-byte chunk
  constexpr int KV_CPR = D / KV_PACK;
  constexpr int KV_ROWS = BN * KV_CPR / (k_warps * 32);
  const int kv_r0 = tid / KV_CPR * KV_ROWS, kv_ch = tid % KV_CPR;
  const bool one_entry = rows.shared_entry(KV_ROWS);
  int kv_ent = 0;  // the entry of rows kv_r0.. of the next tile to load (one_entry)
  auto locate = [&](int j0) {
    const int j = j0 + kv_r0;
    if (one_entry && j < seq_kv) kv_ent = rows.entry(sq, j);
  };
  auto load_kv = [&](int buf, int j0) {
    const int j = j0 + kv_r0;
    if (one_entry) {  // consecutive rows of one page: one address, then a stride
      const Kv* kr = k + kv_ch * KV_PACK + (j < seq_kv ? rows.row(sq, kv_ent, j) * kv_stride : 0);
      const Kv* vr = v + (kr - k);
#pragma unroll
      for (int u = 0; u < KV_ROWS; ++u) {
        const bool ok = j + u < seq_kv;
        cp_async_16(k_in + buf * BN * D + in_off(kv_r0 + u, kv_ch), ok ? kr + u * kv_stride : k, ok);
        cp_async_16(v_in + buf * BN * D + in_off(kv_r0 + u, kv_ch), ok ? vr + u * kv_stride : v, ok);
      }
      return;
    }
#pragma unroll
    for (int u = 0; u < KV_ROWS; ++u) {
      const bool ok = j + u < seq_kv;
      const int64_t off = kv_ch * KV_PACK + (ok ? rows.row(sq, rows.entry(sq, j + u), j + u) * kv_stride : 0);
      cp_async_16(k_in + buf * BN * D + in_off(kv_r0 + u, kv_ch), k + off, ok);
      cp_async_16(v_in + buf * BN * D + in_off(kv_r0 + u, kv_ch), v + off, ok);
    }
  };

  load_tile<T, D, BM>(
      q_s, [&](int r) { return q + query_of(i0 + r) * q_stride + int64_t(head_of(i0 + r)) * D; }, rows_valid, tid);
  if (n_tiles > 0) {
    locate(kv_lo);
    load_kv(0, kv_lo);
  }
  cp_async_commit();
  if (n_tiles > 1) locate(kv_lo + BN);

  const int g = lane / 4, t4 = lane % 4;
  const int wrow0 = warp * 16 * WM;  // first tile row of this warp
  const float scale_log2 = p.scale * k_log2e;

  float acc[WM][D / 8][4];
  float m_run[WM][2], l_run[WM][2];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][nb][e] = 0.f;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      m_run[mi][hh] = -INFINITY;
      l_run[mi][hh] = 0.f;
    }
  }

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<0>();
    __syncthreads();
    const int j0 = kv_lo + t * BN;
    if (t + 1 < n_tiles) {
      load_kv((t + 1) & 1, j0 + BN);
      if (t + 2 < n_tiles) locate(j0 + 2 * BN);  // consumed next iteration: no stall here
    }
    cp_async_commit();
    if constexpr (kFp8) {  // every thread is past the previous tile's math (synced above)
      widen_tile<T, D>(k_in + (t & 1) * BN * D, k_s, tid);
      widen_tile<T, D>(v_in + (t & 1) * BN * D, v_s, tid);
      __syncthreads();
    }
    const T* kt = k_s + (kFp8 ? 0 : (t & 1) * BN * D);
    const T* vt = v_s + (kFp8 ? 0 : (t & 1) * BN * D);

    // S = Q · K^T for this warp's rows: [WM][BN/8 n-blocks][4]
    float s[WM][BN / 8][4];
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mi][nb][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[WM][4];
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
        ldmatrix_x4(qa[mi], q_s + swz<D>(wrow0 + mi * 16 + lane % 16, kk * 2 + lane / 16));
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, kt + swz<D>(np * 16 + lane % 8 + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          mma_16816<T>(s[mi][2 * np], qa[mi], kb[0], kb[1]);
          mma_16816<T>(s[mi][2 * np + 1], qa[mi], kb[2], kb[3]);
        }
      }
    }

    // Mask kv columns a row may not see (only on tiles crossing the diagonal, seq_kv or q_first).
    if (j0 + BN > mask_from || skips_rows) {
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = i0 + wrow0 + mi * 16 + g + 8 * hh;
          const int vis = !Packed && row < p.q_first ? 0
                          : p.causal                 ? min(kv_hi, diag + query_of(row) + 1)
                                                     : kv_hi;
#pragma unroll
          for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (j0 + nb * 8 + 2 * t4 + e >= vis) s[mi][nb][2 * hh + e] = -INFINITY;
        }
    }

    // Online softmax: rows g and g+8 of each slice; a quad of lanes shares a row.
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float mx = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < BN / 8; ++nb)
          mx = fmaxf(mx, fmaxf(s[mi][nb][2 * hh], s[mi][nb][2 * hh + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run[mi][hh], mx * scale_log2);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet
        const float corr = exp2f(m_run[mi][hh] - m_use);
        m_run[mi][hh] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pe = exp2f(fmaf(s[mi][nb][2 * hh + e], scale_log2, -m_use));
            s[mi][nb][2 * hh + e] = pe;
            sum += pe;
          }
        l_run[mi][hh] = l_run[mi][hh] * corr + sum;
#pragma unroll
        for (int nb = 0; nb < D / 8; ++nb) {
          acc[mi][nb][2 * hh] *= corr;
          acc[mi][nb][2 * hh + 1] *= corr;
        }
      }

    // O += P · V; P's accumulator layout is the A-fragment layout (16 kv columns per step).
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[WM][4];
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        pa[mi][0] = pack2<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
        pa[mi][1] = pack2<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
        pa[mi][2] = pack2<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
        pa[mi][3] = pack2<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, vt + swz<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16));
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          mma_16816<T>(acc[mi][2 * dp], pa[mi], vb[0], vb[1]);
          mma_16816<T>(acc[mi][2 * dp + 1], pa[mi], vb[2], vb[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: O = acc / l, LSE = m·ln2 + ln(l) (m is in the log2 domain of scaled scores).
  T* o = static_cast<T*>(p.o);
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float l = l_run[mi][hh];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = i0 + wrow0 + mi * 16 + g + 8 * hh;
      if (row >= tile_rows) continue;
      if constexpr (Packed) {  // the split's partial, in the natural-log domain of scaled scores
        const int64_t slot =
            ((int64_t(split) * p.batch + blockIdx.z) * p.heads + head_of(row)) * seq_q + query_of(row);
        float* part = p.part_acc + slot * D + 2 * t4;
#pragma unroll
        for (int nb = 0; nb < D / 8; ++nb)
          *reinterpret_cast<float2*>(part + nb * 8) =
              make_float2(acc[mi][nb][2 * hh] * p.v_scale, acc[mi][nb][2 * hh + 1] * p.v_scale);
        if (t4 == 0) {
          p.part_ml[slot * 2] = m_run[mi][hh] * k_ln2;
          p.part_ml[slot * 2 + 1] = l;
        }
        continue;
      }
      const float inv = l > 0.f ? p.v_scale / l : 0.f;
      T* orow = o + (sq.q_row0 + row) * q_stride + int64_t(head_of(row)) * D + 2 * t4;
#pragma unroll
      for (int nb = 0; nb < D / 8; ++nb)
        *reinterpret_cast<uint32_t*>(orow + nb * 8) =
            pack2<T>(acc[mi][nb][2 * hh] * inv, acc[mi][nb][2 * hh + 1] * inv);
      if (t4 == 0)
        p.lse[sq.lse0 + head_of(row) * sq.lse_head + row] =
            l > 0.f ? m_run[mi][hh] * k_ln2 + logf(l) : -INFINITY;
    }
}

// One warp per query row; lane x holds elements x, x+32, ... of q and of the accumulator.
constexpr int k_simple_max_per_lane = 8;  // head_dim <= 256

template <class T, class Kv, class Rows>
__global__ void flash_fwd_simple_kernel(FwdParams p, Rows rows, int d) {
  const int lane = threadIdx.x % 32;
  const int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int h = blockIdx.y;
  const SeqView sq = rows.seq(blockIdx.z, p.heads);
  if (i >= sq.q_len) return;
  const int kh = h / p.group;
  const int64_t q_stride = int64_t(p.heads) * d;
  const T* q = static_cast<const T*>(p.q) + (sq.q_row0 + i) * q_stride + int64_t(h) * d;
  const Kv* k = static_cast<const Kv*>(p.k) + int64_t(kh) * d;
  const Kv* v = static_cast<const Kv*>(p.v) + int64_t(kh) * d;
  const int64_t kv_stride = int64_t(p.kv_heads) * d;
  float qr[k_simple_max_per_lane], acc[k_simple_max_per_lane];
#pragma unroll
  for (int u = 0; u < k_simple_max_per_lane; ++u) {
    const int x = lane + 32 * u;
    qr[u] = x < d ? to_float(q[x]) : 0.f;
    acc[u] = 0.f;
  }
  const int seq_kv = sq.kv_len;
  const int vis = i < p.q_first ? 0 : p.causal ? max(0, min(seq_kv, seq_kv - sq.q_len + i + 1)) : seq_kv;
  float m = -INFINITY, l = 0.f;
  for (int j = 0; j < vis; ++j) {
    const int64_t off = rows.row(sq, rows.entry(sq, j), j) * kv_stride;
    float dot = 0.f;
#pragma unroll
    for (int u = 0; u < k_simple_max_per_lane; ++u) {
      const int x = lane + 32 * u;
      if (x < d) dot += qr[u] * to_float(k[off + x]);
    }
    const float s = warp_sum(dot) * p.scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);
    const float pj = expf(s - m_new);
    l = l * corr + pj;
#pragma unroll
    for (int u = 0; u < k_simple_max_per_lane; ++u) {
      const int x = lane + 32 * u;
      if (x < d) acc[u] = acc[u] * corr + pj * to_float(v[off + x]);
    }
    m = m_new;
  }
  const float inv = l > 0.f ? p.v_scale / l : 0.f;
  T* o = static_cast<T*>(p.o) + (sq.q_row0 + i) * q_stride + int64_t(h) * d;
#pragma unroll
  for (int u = 0; u < k_simple_max_per_lane; ++u) {
    const int x = lane + 32 * u;
    if (x < d) o[x] = from_float<T>(acc[u] * inv);
  }
  if (lane == 0) p.lse[sq.lse0 + h * sq.lse_head + i] = l > 0.f ? m + logf(l) : -INFINITY;
}

// grid: (query tiles of the longest sequence, heads, sequences).
template <class T, class Kv, int D, int WM, class Rows>
void launch_tc(const FwdParams& p, const Rows& rows, int max_q, int seqs, cudaStream_t stream) {
  constexpr int BM = 16 * k_warps * WM;
  constexpr int smem = tc_smem_bytes<T, Kv, D, WM>();
  auto kernel = flash_fwd_tc_kernel<T, Kv, D, WM, Rows>;
  PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(unsigned((max_q + BM - 1) / BM), unsigned(p.heads), unsigned(seqs));
  kernel<<<grid, k_warps * 32, smem, stream>>>(p, rows);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class T, class Kv, int D, class Rows>
void launch_tc_d(const FwdParams& p, const Rows& rows, int max_q, int seqs, int block_m, cudaStream_t stream) {
  // Varlen steps always take 64-row tiles (varlen_flash_prefill): no 128-row kernel for them.
  if constexpr (std::is_same_v<Rows, VarlenRows>) {
    launch_tc<T, Kv, D, 1>(p, rows, max_q, seqs, stream);
  } else {
    // 128-row tiles halve the shared-memory reads of K and V per flop.
    if (block_m == 0) block_m = 128;
    if (block_m == 64) launch_tc<T, Kv, D, 1>(p, rows, max_q, seqs, stream);
    else if (block_m == 128) launch_tc<T, Kv, D, 2>(p, rows, max_q, seqs, stream);
    else throw ConfigError("flash_attention: block_m must be 64 or 128, got " + std::to_string(block_m));
  }
}

// The tensor-core kernel for 16-bit storage and head_dim 64 or 128, else the per-row one.
template <class T, class Kv, class Rows>
void launch_fwd(const FwdParams& p, const Rows& rows, int head_dim, int max_q, int seqs, int block_m,
                cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>) {
    if (head_dim == 64) return launch_tc_d<T, Kv, 64>(p, rows, max_q, seqs, block_m, stream);
    if (head_dim == 128) return launch_tc_d<T, Kv, 128>(p, rows, max_q, seqs, block_m, stream);
  }
  constexpr int rows_per_block = 4;
  const dim3 grid(unsigned((max_q + rows_per_block - 1) / rows_per_block), unsigned(p.heads), unsigned(seqs));
  flash_fwd_simple_kernel<T, Kv><<<grid, rows_per_block * 32, 0, stream>>>(p, rows, head_dim);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T, class Kv>
void flash_attention(const T* q, const Kv* k, const Kv* v, T* o, float* lse, const AttnShape& a,
                     cudaStream_t stream, int block_m) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw ConfigError("flash_attention: heads (" + std::to_string(a.heads) +
                      ") must be a positive multiple of kv_heads (" + std::to_string(a.kv_heads) + ")");
  if (a.head_dim <= 0 || a.head_dim > 32 * k_simple_max_per_lane)
    throw ConfigError("flash_attention: head_dim " + std::to_string(a.head_dim) +
                      " unsupported on CUDA (1..256)");
  if (a.seq_kv > a.kv_capacity)
    throw ConfigError("flash_attention: seq_kv exceeds kv_capacity");
  if (a.seq_q <= 0 || a.batch <= 0) return;
  const float kv_scale = kv_scale_of<T, Kv>(a.kv, "flash_attention");
  const FwdParams p{q, k, v, o, lse, int(a.heads), int(a.kv_heads), int(a.group()), a.causal, a.scale() * kv_scale,
                    int(a.q_first), kv_scale};
  const DenseRows rows{int(a.seq_q), int(a.seq_kv), a.kv_capacity};
  launch_fwd<T, Kv>(p, rows, int(a.head_dim), int(a.seq_q), int(a.batch), block_m, stream);
}

namespace detail {

template <class T, class Kv>
void varlen_flash_prefill(const T* q, const Kv* k_pages, const Kv* v_pages, const int32_t* table,
                          const int32_t* query_start, const int32_t* kv_len, T* o, float* lse,
                          const ops::VarlenAttnShape& a, int64_t first_seq, cudaStream_t stream) {
  const int64_t seqs = a.seqs - first_seq;
  if (seqs <= 0 || a.max_q <= 0) return;
  const float kv_scale = kv_scale_of<T, Kv>(a.kv, "varlen flash_attention");
  const FwdParams p{q, k_pages, v_pages, o, lse, int(a.heads), int(a.kv_heads), int(a.group()), true,
                    a.scale() * kv_scale, 0, kv_scale};
  const VarlenRows rows{table, query_start, kv_len, a.tokens, int(a.paged.max_blocks),
                        PageDivider::make(a.paged.block), int(first_seq)};
  // 64-row query tiles: twice the CTAs for short chunks, and on an H100 the causal kernel ran
  // faster with them than with 128-row tiles at every length measured (512 to 4096 queries).
  launch_fwd<T, Kv>(p, rows, int(a.head_dim), int(a.max_q), int(seqs), 64, stream);
}

bool flash_decode_takes(const AttnShape& a, int element_bytes) {
  return element_bytes == 2 && (a.head_dim == 64 || a.head_dim == 128) && a.q_first == 0;
}

template <class T, class Kv>
void flash_decode_partials(const T* q, const Kv* k, const Kv* v, const DecodePages& pages, const AttnShape& a,
                           int splits, float* part_acc, float* part_ml, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    throw ConfigError("flash_decode_partials: the tensor-core kernel takes bf16 or fp16");
  } else {
    if (!flash_decode_takes(a, int(sizeof(T))))
      throw ConfigError("flash_decode_partials: head_dim must be 64 or 128, with no skipped query rows");
    if (a.seq_q <= 0 || a.batch <= 0) return;
    const float kv_scale = kv_scale_of<T, Kv>(a.kv, "decode_attention");
    FwdParams p{q, k, v, nullptr, nullptr, int(a.heads), int(a.kv_heads), int(a.group()), a.causal,
                a.scale() * kv_scale, 0, kv_scale};
    // Splits of whole 64-key tiles, so no tile crosses a split (the last ones may hold no key:
    // their partials say so, max −inf and denominator 0).
    const int per_split = int((a.seq_kv + splits - 1) / splits);
    p.split_len = std::max(k_block_n, (per_split + k_block_n - 1) / k_block_n * k_block_n);
    p.splits = splits;
    p.batch = int(a.batch);
    p.part_acc = part_acc;
    p.part_ml = part_ml;
    const int rows_per_head = int(a.group() * a.seq_q);
    auto launch = [&](auto d_c, auto wm_c, const auto& rows) {
      constexpr int D = decltype(d_c)::value, WM = decltype(wm_c)::value, BM = 16 * k_warps * WM;
      using Rows = std::decay_t<decltype(rows)>;
      constexpr int smem = tc_smem_bytes<T, Kv, D, WM>();
      auto kernel = flash_fwd_tc_kernel<T, Kv, D, WM, Rows, true>;
      PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const int tiles = (rows_per_head + BM - 1) / BM;
      const dim3 grid(unsigned(tiles * splits), unsigned(a.kv_heads), unsigned(a.batch));
      kernel<<<grid, k_warps * 32, smem, stream>>>(p, rows);
      PERFSIM_CUDA_CHECK_LAUNCH();
    };
    // 64-row tiles up to 64 rows a KV head (a group of 8 verifying 8 tokens), 128 beyond.
    auto by_tile = [&](auto d_c, const auto& rows) {
      if (rows_per_head <= 64) launch(d_c, std::integral_constant<int, 1>{}, rows);
      else launch(d_c, std::integral_constant<int, 2>{}, rows);
    };
    auto by_dim = [&](const auto& rows) {
      if (a.head_dim == 64) by_tile(std::integral_constant<int, 64>{}, rows);
      else by_tile(std::integral_constant<int, 128>{}, rows);
    };
    if (pages.table == nullptr) {
      by_dim(DenseRows{int(a.seq_q), int(a.seq_kv), a.kv_capacity});
    } else {
      by_dim(PagedDenseRows{pages.table, int(a.seq_q), int(a.seq_kv), pages.max_blocks,
                            PageDivider::make(pages.block_size)});
    }
  }
}

}  // namespace detail

#define PERFSIM_CUDA_INSTANTIATE_FLASH_FWD(T, Kv)                                                        \
  template void flash_attention<T, Kv>(const T*, const Kv*, const Kv*, T*, float*, const AttnShape&,     \
                                       cudaStream_t, int);                                               \
  template void detail::varlen_flash_prefill<T, Kv>(const T*, const Kv*, const Kv*, const int32_t*,      \
                                                    const int32_t*, const int32_t*, T*, float*,          \
                                                    const ops::VarlenAttnShape&, int64_t, cudaStream_t); \
  template void detail::flash_decode_partials<T, Kv>(const T*, const Kv*, const Kv*, const detail::DecodePages&, \
                                                     const AttnShape&, int, float*, float*, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_FLASH_FWD(float, float)
PERFSIM_CUDA_INSTANTIATE_FLASH_FWD(__nv_bfloat16, __nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_FLASH_FWD(__half, __half)
// An fp8 KV cache under bf16/fp16 attention.
PERFSIM_CUDA_INSTANTIATE_FLASH_FWD(__nv_bfloat16, __nv_fp8_e4m3)
PERFSIM_CUDA_INSTANTIATE_FLASH_FWD(__half, __nv_fp8_e4m3)

}  // namespace perfsim::cuda
