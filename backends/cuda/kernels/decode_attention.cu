// Split-KV decode attention ("flash decoding", Dao et al. 2023), contiguous and paged caches.
// Q [b, seq_q, H, d]; K, V [b, kv_capacity, Hkv, d] or pages [num_blocks, block_size, Hkv, d]
// through block_table [b, max_blocks]; O like Q; LSE [b, H, seq_q] fp32.
//
// Kernel 1 computes each split's partial, by one of two kernels (decode_takes_tensor_cores,
// core/cost/kernel_paths.hpp): with several query rows a KV head in bf16/fp16 at head_dim 64 or
// 128, the tensor-core flash kernel with the GQA group packed into one tile
// (detail::flash_decode_partials, flash_attention.cu), which reads each K/V row once for all
// the rows; else the CUDA-core kernel below.
// CUDA-core kernel: one CTA of 4 warps per (split, kv head, batch); splits are sized so that the
// grid fills every SM several times (decode_attention_splits). Its rows are the query rows
// of every head of the GQA group (group·seq_q), so each K/V row is read from memory once per
// group. A K/V row of d elements is read by L = min(32, d/pack) lanes with 16-byte loads, so a
// warp covers G = 32/L kv positions per load and issues U = 4 such loads for K and for V
// before using any (2 KiB of K and 2 of V in flight per warp: 8 positions of bf16 at d = 128,
// 16 of fp8). Scores are sums over the L lanes of a row; the online softmax (max, denominator,
// acc) is updated once per G·U positions with a warp-wide batch max (split_kv_step,
// attention_device.cuh). An fp8 cache (the fp8_kv pass) is read as stored, 16 elements per
// load, and widened in registers, once per step whatever the rows; its scale is folded into the
// softmax scale (K) and into the partial accumulator (V). So the fp8 kernel moves half the bytes
// of the bf16 one and no converted copy of the cache exists anywhere; its lanes hold 16
// elements of each row's query and accumulator (bf16: 8), so the 4-row kernel takes ~230
// registers (2 CTAs per SM; bf16 ~155, 3). The 4 warps merge in shared memory and write an
// unnormalized partial per (split, b, h, i): acc[d], max, denominator (natural-log domain of
// scaled scores). Query rows beyond R per pass (R = 1 or 4) are handled by further passes.
// Kernel 2: one block per (b, h, i) and 32 output columns merges the splits: M = max m_s,
// L = Σ l_s·e^(m_s−M), O = Σ acc_s·e^(m_s−M) / L, LSE = M + ln L (−inf and O = 0 when nothing
// is visible); 8 lanes of splits per column are summed in a fixed order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/decode_attention.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "core/errors.hpp"

namespace perfsim::cuda {

using namespace attn_detail;

namespace {

constexpr int k_warps = 4;
constexpr int k_unroll = 4;           // 16-byte loads of K (and of V) in flight per lane
constexpr int k_ctas_per_sm = 4;      // grid target of the split sizing
constexpr int k_min_split_len = 64;   // kv positions per split, at least
constexpr int k_max_splits = 256;
constexpr int k_combine_lanes = 8;    // split lanes per output column in the combine kernel

struct DecodeParams {
  const void* q;
  const void* k;
  const void* v;
  float* part_acc;  // [splits, b, H, seq_q, d]
  float* part_ml;   // [splits, b, H, seq_q, 2]
  int batch, seq_q, seq_kv, heads, kv_heads, group, splits, split_len;
  bool causal;
  float scale;      // 1/√d times K's scale (kv_scale_of)
  float v_scale;    // V's
};

// Row of K/V holding kv position j of batch b (in units of Hkv·d elements).
struct ContiguousRows {
  int64_t capacity;
  __device__ int64_t operator()(int b, int j) const { return int64_t(b) * capacity + j; }
};
// Pages of a power-of-two size (vLLM's 16, the default) split j by shift and mask: an integer
// division by a runtime value costs a few dozen instructions per row in a kernel that is
// already compute-bound at GQA groups of 4.
struct PagedRows {
  const int32_t* table;  // [b, max_blocks]
  int block_size, max_blocks;
  int shift;             // log2(block_size), or -1 when it is not a power of two
  __device__ int64_t operator()(int b, int j) const {
    const int32_t* row = table + int64_t(b) * max_blocks;
    if (shift >= 0) return (int64_t(row[j >> shift]) << shift) | (j & (block_size - 1));
    return int64_t(row[j / block_size]) * block_size + j % block_size;
  }
};

int log2_if_power_of_two(int v) {
  if (v <= 0 || (v & (v - 1)) != 0) return -1;
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

// Q and O stored as T, K and V as Kv (T, or fp8 e4m3).
template <class T, class Kv, int D, int R, class Rows>
__global__ void __launch_bounds__(k_warps * 32) decode_split_kernel(DecodeParams p, Rows rows) {
  using Geo = SplitGeometry<T, Kv, D>;
  constexpr int L = Geo::L, E = Geo::E, P = Geo::P, G = Geo::G;
  __shared__ float red_acc[k_warps][R][D];
  __shared__ float red_ml[k_warps][R][2];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub = lane % L, grp = lane / L;  // element slice and kv row of this lane
  const int split = blockIdx.x, kh = blockIdx.y, b = blockIdx.z;
  const int j_begin = split * p.split_len;
  const int j_end = min(p.seq_kv, j_begin + p.split_len);
  const int64_t kv_stride = int64_t(p.kv_heads) * D;
  const Kv* k = static_cast<const Kv*>(p.k) + int64_t(kh) * D + sub * E;
  const Kv* v = static_cast<const Kv*>(p.v) + int64_t(kh) * D + sub * E;
  const int total_rows = p.group * p.seq_q;  // row r: head kh·group + r / seq_q, query r % seq_q
  constexpr int chunk = G * k_unroll;        // kv positions per warp iteration

  for (int r0 = 0; r0 < total_rows; r0 += R) {
    float qf[R][E], acc[R][E], m[R], l[R];
    int vis[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int rr = r0 + r;
      const bool live = rr < total_rows;
      const int h = kh * p.group + (live ? rr / p.seq_q : 0);
      const int i = live ? rr % p.seq_q : 0;
      if (live) {
        load_query<T, E, Geo::QP>(static_cast<const T*>(p.q) + ((int64_t(b) * p.seq_q + i) * p.heads + h) * D + sub * E,
                                  p.scale, qf[r]);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) qf[r][e] = 0.f;
      }
      vis[r] = !live ? 0 : p.causal ? max(0, min(p.seq_kv, p.seq_kv - p.seq_q + i + 1)) : p.seq_kv;
      m[r] = -INFINITY;
      l[r] = 0.f;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[r][e] = 0.f;
    }

    for (int base = j_begin + warp * chunk; base < j_end; base += k_warps * chunk) {
      uint4 kw[k_unroll][P], vw[k_unroll][P];
#pragma unroll
      for (int u = 0; u < k_unroll; ++u) {
        const int j = base + u * G + grp;
        if (j < j_end) {
          const int64_t row = rows(b, j);
          load_words<P>(k + row * kv_stride, kw[u]);
          load_words<P>(v + row * kv_stride, vw[u]);
        } else {
#pragma unroll
          for (int c = 0; c < P; ++c) kw[u][c] = vw[u][c] = make_uint4(0, 0, 0, 0);
        }
      }
      split_kv_step<Kv, R, k_unroll, E, P, L>(
          qf, kw, vw, total_rows - r0,
          [&](int r, int u) {
            const int j = base + u * G + grp;
            return j < j_end && j < vis[r];
          },
          m, l, acc);
    }

    // Sum the G row groups of the warp (they share the warp-wide max), then merge the warps.
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int o = L; o < 32; o <<= 1) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], o);
#pragma unroll
        for (int e = 0; e < E; ++e) acc[r][e] += __shfl_xor_sync(0xffffffffu, acc[r][e], o);
      }
      if (grp == 0) {
#pragma unroll
        for (int e = 0; e < E; ++e) red_acc[warp][r][sub * E + e] = acc[r][e];
      }
      if (lane == 0) {
        red_ml[warp][r][0] = m[r];
        red_ml[warp][r][1] = l[r];
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < R * D; e += k_warps * 32) {
      const int r = e / D, x = e % D, rr = r0 + r;
      if (rr >= total_rows) continue;
      float mm = -INFINITY;
#pragma unroll
      for (int w = 0; w < k_warps; ++w) mm = fmaxf(mm, red_ml[w][r][0]);
      float a = 0.f, ll = 0.f;
      if (mm != -INFINITY) {
#pragma unroll
        for (int w = 0; w < k_warps; ++w) {
          const float f = expf(red_ml[w][r][0] - mm);  // 0 for a warp that saw nothing
          a += red_acc[w][r][x] * f;
          ll += red_ml[w][r][1] * f;
        }
      }
      const int h = kh * p.group + rr / p.seq_q, i = rr % p.seq_q;
      const int64_t slot = ((int64_t(split) * p.batch + b) * p.heads + h) * p.seq_q + i;
      p.part_acc[slot * D + x] = a * p.v_scale;
      if (x == 0) {
        p.part_ml[slot * 2] = mm;
        p.part_ml[slot * 2 + 1] = ll;
      }
    }
    __syncthreads();  // red_* are rewritten by the next pass
  }
}

// Block (row, column tile): 32 output columns × k_combine_lanes lanes of splits.
template <class T>
__global__ void __launch_bounds__(32 * k_combine_lanes) decode_combine_kernel(DecodeParams p, int d,
                                                                             T* o, float* lse) {
  __shared__ float weight[k_max_splits];
  __shared__ float red[k_combine_lanes][33];
  __shared__ float total[2];
  const int64_t row = blockIdx.x;  // (b·H + h)·seq_q + i
  const int64_t rows = int64_t(p.batch) * p.heads * p.seq_q;
  const int tx = threadIdx.x, ty = threadIdx.y;
  if (ty == 0) {
    float mm = -INFINITY;
    for (int s = tx; s < p.splits; s += 32) mm = fmaxf(mm, p.part_ml[(s * rows + row) * 2]);
    mm = warp_max(mm);
    float ll = 0.f;
    for (int s = tx; s < p.splits; s += 32) {
      const float f = mm == -INFINITY ? 0.f : expf(p.part_ml[(s * rows + row) * 2] - mm);
      weight[s] = f;
      ll += p.part_ml[(s * rows + row) * 2 + 1] * f;
    }
    ll = warp_sum(ll);
    if (tx == 0) total[0] = mm, total[1] = ll;
  }
  __syncthreads();
  const float mm = total[0], ll = total[1];
  const int x = blockIdx.y * 32 + tx;
  float a = 0.f;
#pragma unroll 4
  for (int s = ty; s < p.splits; s += k_combine_lanes) a += p.part_acc[(s * rows + row) * d + x] * weight[s];
  red[ty][tx] = a;
  __syncthreads();
  if (ty != 0) return;
  float sum = 0.f;
#pragma unroll
  for (int y = 0; y < k_combine_lanes; ++y) sum += red[y][tx];
  const int64_t i = row % p.seq_q, h = (row / p.seq_q) % p.heads, b = row / (int64_t(p.seq_q) * p.heads);
  o[((b * p.seq_q + i) * p.heads + h) * d + x] = from_float<T>(ll > 0.f ? sum / ll : 0.f);
  if (blockIdx.y == 0 && tx == 0) lse[row] = ll > 0.f ? mm + logf(ll) : -INFINITY;
}

bool split_kernel_head_dim(int64_t d) { return d == 32 || d == 64 || d == 128 || d == 256; }

template <class T, class Kv, class Rows>
void launch_decode(const T* q, const Kv* k, const Kv* v, T* o, float* lse, const AttnShape& a,
                   void* workspace, Rows rows, DecodeKernel kernel, cudaStream_t stream) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw ConfigError("decode_attention: heads must be a positive multiple of kv_heads");
  if (a.seq_q <= 0 || a.batch <= 0) return;
  const int splits = decode_attention_splits(a);
  const float kv_scale = kv_scale_of<T, Kv>(a.kv, "decode_attention");
  DecodeParams p{q, k, v, nullptr, nullptr,
                 int(a.batch), int(a.seq_q), int(a.seq_kv), int(a.heads), int(a.kv_heads),
                 int(a.group()), splits, 0, a.causal, a.scale() * kv_scale, kv_scale};
  p.split_len = int((a.seq_kv + splits - 1) / splits);
  const int64_t slots = int64_t(splits) * a.batch * a.heads * a.seq_q;
  p.part_acc = static_cast<float*>(workspace);
  p.part_ml = p.part_acc + slots * a.head_dim;
  const dim3 grid(unsigned(splits), unsigned(a.kv_heads), unsigned(a.batch));
  const bool one_row = a.group() * a.seq_q == 1;
  const bool tensor_cores = kernel == DecodeKernel::tensor_cores ||
                            (kernel == DecodeKernel::automatic &&
                             decode_takes_tensor_cores(a.group() * a.seq_q, int64_t(sizeof(T)), a.head_dim));
  if (tensor_cores && !detail::flash_decode_takes(a, int(sizeof(T))))
    throw ConfigError("decode_attention: the tensor-core kernel takes bf16/fp16 with head_dim 64 or 128");
  auto launch = [&](auto d_c) {
    constexpr int D = decltype(d_c)::value;
    if (one_row) decode_split_kernel<T, Kv, D, 1><<<grid, k_warps * 32, 0, stream>>>(p, rows);
    else decode_split_kernel<T, Kv, D, 4><<<grid, k_warps * 32, 0, stream>>>(p, rows);
  };
  if (tensor_cores) {
    if constexpr (!std::is_same_v<T, float>) {
      detail::DecodePages pages;
      if constexpr (std::is_same_v<Rows, PagedRows>) pages = {rows.table, rows.block_size, rows.max_blocks};
      detail::flash_decode_partials(q, k, v, pages, a, splits, p.part_acc, p.part_ml, stream);
    }
  } else {
    switch (a.head_dim) {
      case 32: launch(std::integral_constant<int, 32>{}); break;
      case 64: launch(std::integral_constant<int, 64>{}); break;
      case 128: launch(std::integral_constant<int, 128>{}); break;
      case 256: launch(std::integral_constant<int, 256>{}); break;
      default:
        throw ConfigError("decode_attention: head_dim " + std::to_string(a.head_dim) +
                          " unsupported (32, 64, 128 or 256)");
    }
    PERFSIM_CUDA_CHECK_LAUNCH();
  }
  const int64_t out_rows = a.batch * a.heads * a.seq_q;
  decode_combine_kernel<T><<<dim3(unsigned(out_rows), unsigned(a.head_dim / 32)),
                             dim3(32, k_combine_lanes), 0, stream>>>(p, int(a.head_dim), o, lse);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

int decode_attention_splits(const AttnShape& a) {
  // Enough CTAs (splits × kv heads × batch) to fill every SM k_ctas_per_sm times, but no
  // split shorter than k_min_split_len positions.
  const int64_t ctas = std::max<int64_t>(1, a.batch * a.kv_heads);
  const int64_t target = int64_t(detail::sm_count()) * k_ctas_per_sm;
  const int64_t by_grid = (target + ctas - 1) / ctas;
  const int64_t by_len = (a.seq_kv + k_min_split_len - 1) / k_min_split_len;
  return int(std::clamp<int64_t>(std::min(by_grid, by_len), 1, k_max_splits));
}

int64_t decode_attention_workspace_bytes(const AttnShape& a) {
  const int64_t slots = int64_t(decode_attention_splits(a)) * a.batch * a.heads * a.seq_q;
  return slots * (a.head_dim + 2) * int64_t(sizeof(float));
}

template <class T, class Kv>
void decode_attention(const T* q, const Kv* k, const Kv* v, T* o, float* lse, const AttnShape& a,
                      void* workspace, cudaStream_t stream, DecodeKernel kernel) {
  if (a.seq_kv > a.kv_capacity) throw ConfigError("decode_attention: seq_kv exceeds kv_capacity");
  // Query rows skipped (a ring-attention block's) are the flash kernel's to leave empty.
  if (!split_kernel_head_dim(a.head_dim) || a.q_first > 0) return flash_attention(q, k, v, o, lse, a, stream);
  launch_decode(q, k, v, o, lse, a, workspace, ContiguousRows{a.kv_capacity}, kernel, stream);
}

template <class T, class Kv>
void paged_decode_attention(const T* q, const Kv* k_pages, const Kv* v_pages,
                            const int32_t* block_table, int block_size, int max_blocks, T* o,
                            float* lse, const AttnShape& a, void* workspace, cudaStream_t stream,
                            DecodeKernel kernel) {
  if (block_size <= 0 || int64_t(block_size) * max_blocks < a.seq_kv)
    throw ConfigError("paged_decode_attention: block_size·max_blocks must cover seq_kv");
  launch_decode(q, k_pages, v_pages, o, lse, a, workspace,
                PagedRows{block_table, block_size, max_blocks, log2_if_power_of_two(block_size)}, kernel, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_DECODE(T, Kv)                                                        \
  template void decode_attention<T, Kv>(const T*, const Kv*, const Kv*, T*, float*, const AttnShape&, \
                                        void*, cudaStream_t, DecodeKernel);                         \
  template void paged_decode_attention<T, Kv>(const T*, const Kv*, const Kv*, const int32_t*, int, int, \
                                              T*, float*, const AttnShape&, void*, cudaStream_t,   \
                                              DecodeKernel);
PERFSIM_CUDA_INSTANTIATE_DECODE(float, float)
PERFSIM_CUDA_INSTANTIATE_DECODE(__nv_bfloat16, __nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_DECODE(__half, __half)
// An fp8 KV cache under bf16/fp16 attention (the tensor-core precisions inference runs in).
PERFSIM_CUDA_INSTANTIATE_DECODE(__nv_bfloat16, __nv_fp8_e4m3)
PERFSIM_CUDA_INSTANTIATE_DECODE(__half, __nv_fp8_e4m3)

}  // namespace perfsim::cuda
