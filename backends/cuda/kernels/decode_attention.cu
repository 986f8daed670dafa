// Split-KV decode attention ("flash decoding", Dao et al. 2023), contiguous and paged caches.
// Q [b, seq_q, H, d]; K, V [b, kv_capacity, Hkv, d] or pages [num_blocks, block_size, Hkv, d]
// through block_table [b, max_blocks]; O like Q; LSE [b, H, seq_q] fp32.
//
// Kernel 1: one CTA of 4 warps per (split, kv head, batch). Its rows are the query rows of
// every head of the GQA group (group·seq_q), so each K/V row is read from memory once per
// group. Warp w takes positions split_start + w, +4, ... (4 at a time, loads issued before
// use); each lane holds d/32 contiguous elements; scores are warp sums; an online softmax
// per row keeps (max, denominator, acc). The 4 warps merge in shared memory and write an
// unnormalized partial per (split, b, h, i): acc[d], max, denominator (natural-log domain
// of scaled scores). Rows beyond 8 per pass are handled by further passes over the split.
// Kernel 2: one warp per (b, h, i) merges the splits: M = max m_s, L = Σ l_s·e^(m_s−M),
// O = Σ acc_s·e^(m_s−M) / L, LSE = M + ln L (−inf and O = 0 when nothing is visible).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/decode_attention.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"
#include "core/errors.hpp"

namespace perfsim::cuda {

using namespace attn_detail;

namespace {

constexpr int k_warps = 4;
constexpr int k_rows = 8;            // query rows per pass
constexpr int k_unroll = 4;          // kv positions in flight per warp
constexpr int k_split_target = 256;  // kv positions per split
constexpr int k_max_splits = 64;

struct DecodeParams {
  const void* q;
  const void* k;
  const void* v;
  float* part_acc;  // [splits, b, H, seq_q, d]
  float* part_ml;   // [splits, b, H, seq_q, 2]
  int batch, seq_q, seq_kv, heads, kv_heads, group, splits, split_len;
  bool causal;
  float scale;
};

// Row of K/V holding kv position j of batch b (in units of Hkv·d elements).
struct ContiguousRows {
  int64_t capacity;
  __device__ int64_t operator()(int b, int j) const { return int64_t(b) * capacity + j; }
};
struct PagedRows {
  const int32_t* table;  // [b, max_blocks]
  int block_size, max_blocks;
  __device__ int64_t operator()(int b, int j) const {
    return int64_t(table[int64_t(b) * max_blocks + j / block_size]) * block_size + j % block_size;
  }
};

// E contiguous elements as floats, with the widest aligned loads that fit.
template <class T, int E>
__device__ __forceinline__ void load_vec(const T* p, float (&f)[E]) {
  constexpr int bytes = E * int(sizeof(T));
  if constexpr (bytes % 16 == 0) {
#pragma unroll
    for (int c = 0; c < bytes / 16; ++c) {
      const uint4 w = reinterpret_cast<const uint4*>(p)[c];
      const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
      for (int u = 0; u < 16 / int(sizeof(T)); ++u) f[c * (16 / sizeof(T)) + u] = to_float(e[u]);
    }
  } else if constexpr (bytes == 8) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
    for (int u = 0; u < E; ++u) f[u] = to_float(e[u]);
  } else {
#pragma unroll
    for (int u = 0; u < E; ++u) f[u] = to_float(p[u]);
  }
}

template <class T, int D, class Rows>
__global__ void __launch_bounds__(k_warps * 32) decode_split_kernel(DecodeParams p, Rows rows) {
  constexpr int E = D / 32;
  __shared__ float red_acc[k_warps][k_rows][D];
  __shared__ float red_ml[k_warps][k_rows][2];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int split = blockIdx.x, kh = blockIdx.y, b = blockIdx.z;
  const int j_begin = split * p.split_len;
  const int j_end = min(p.seq_kv, j_begin + p.split_len);
  const int64_t kv_stride = int64_t(p.kv_heads) * D;
  const T* k = static_cast<const T*>(p.k) + int64_t(kh) * D + lane * E;
  const T* v = static_cast<const T*>(p.v) + int64_t(kh) * D + lane * E;
  const int total_rows = p.group * p.seq_q;  // row r: head kh·group + r / seq_q, query r % seq_q

  for (int r0 = 0; r0 < total_rows; r0 += k_rows) {
    float qf[k_rows][E], acc[k_rows][E], m[k_rows], l[k_rows];
    int vis[k_rows];
#pragma unroll
    for (int r = 0; r < k_rows; ++r) {
      const int rr = r0 + r;
      const bool live = rr < total_rows;
      const int h = kh * p.group + (live ? rr / p.seq_q : 0);
      const int i = live ? rr % p.seq_q : 0;
      if (live) {
        load_vec<T, E>(static_cast<const T*>(p.q) + ((int64_t(b) * p.seq_q + i) * p.heads + h) * D + lane * E, qf[r]);
      } else {
#pragma unroll
        for (int u = 0; u < E; ++u) qf[r][u] = 0.f;
      }
#pragma unroll
      for (int u = 0; u < E; ++u) qf[r][u] *= p.scale;
      vis[r] = !live ? 0 : p.causal ? max(0, min(p.seq_kv, p.seq_kv - p.seq_q + i + 1)) : p.seq_kv;
      m[r] = -INFINITY;
      l[r] = 0.f;
#pragma unroll
      for (int u = 0; u < E; ++u) acc[r][u] = 0.f;
    }

    for (int j = j_begin + warp; j < j_end; j += k_warps * k_unroll) {
      float kf[k_unroll][E], vf[k_unroll][E];
#pragma unroll
      for (int x = 0; x < k_unroll; ++x) {
        const int jj = j + x * k_warps;
        if (jj < j_end) {
          const int64_t row = rows(b, jj);
          load_vec<T, E>(k + row * kv_stride, kf[x]);
          load_vec<T, E>(v + row * kv_stride, vf[x]);
        }
      }
#pragma unroll
      for (int x = 0; x < k_unroll; ++x) {
        const int jj = j + x * k_warps;
        if (jj >= j_end) break;
#pragma unroll
        for (int r = 0; r < k_rows; ++r) {
          if (r0 + r >= total_rows) break;
          float dot = 0.f;
#pragma unroll
          for (int u = 0; u < E; ++u) dot += qf[r][u] * kf[x][u];
          const float s = warp_sum(dot);
          if (jj >= vis[r]) continue;
          const float m_new = fmaxf(m[r], s);
          const float corr = expf(m[r] - m_new);
          const float pj = expf(s - m_new);
          l[r] = l[r] * corr + pj;
#pragma unroll
          for (int u = 0; u < E; ++u) acc[r][u] = acc[r][u] * corr + pj * vf[x][u];
          m[r] = m_new;
        }
      }
    }

    // Merge the 4 warps' states, then write this split's partial for each live row.
#pragma unroll
    for (int r = 0; r < k_rows; ++r) {
#pragma unroll
      for (int u = 0; u < E; ++u) red_acc[warp][r][lane * E + u] = acc[r][u];
      if (lane == 0) {
        red_ml[warp][r][0] = m[r];
        red_ml[warp][r][1] = l[r];
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < k_rows * D; e += k_warps * 32) {
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
      p.part_acc[slot * D + x] = a;
      if (x == 0) {
        p.part_ml[slot * 2] = mm;
        p.part_ml[slot * 2 + 1] = ll;
      }
    }
    __syncthreads();  // red_* are rewritten by the next pass
  }
}

template <class T>
__global__ void decode_combine_kernel(DecodeParams p, int d, T* o, float* lse) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;  // (b, h, i)
  const int lane = threadIdx.x % 32;
  const int64_t rows = int64_t(p.batch) * p.heads * p.seq_q;
  if (row >= rows) return;
  float mm = -INFINITY;
  for (int s = 0; s < p.splits; ++s) mm = fmaxf(mm, p.part_ml[(s * rows + row) * 2]);
  float ll = 0.f;
  if (mm != -INFINITY)
    for (int s = 0; s < p.splits; ++s)
      ll += p.part_ml[(s * rows + row) * 2 + 1] * expf(p.part_ml[(s * rows + row) * 2] - mm);
  const float inv = ll > 0.f ? 1.f / ll : 0.f;
  const int64_t i = row % p.seq_q, h = (row / p.seq_q) % p.heads, b = row / (int64_t(p.seq_q) * p.heads);
  T* orow = o + ((b * p.seq_q + i) * p.heads + h) * d;
  for (int x = lane; x < d; x += 32) {
    float a = 0.f;
    if (ll > 0.f)
      for (int s = 0; s < p.splits; ++s)
        a += p.part_acc[(s * rows + row) * d + x] * expf(p.part_ml[(s * rows + row) * 2] - mm);
    orow[x] = from_float<T>(a * inv);
  }
  if (lane == 0) lse[row] = ll > 0.f ? mm + logf(ll) : -INFINITY;  // row == (b·H + h)·seq_q + i
}

bool split_kernel_head_dim(int64_t d) { return d == 32 || d == 64 || d == 128 || d == 256; }

template <class T, class Rows>
void launch_decode(const T* q, const T* k, const T* v, T* o, float* lse, const AttnShape& a,
                   void* workspace, Rows rows, cudaStream_t stream) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw ConfigError("decode_attention: heads must be a positive multiple of kv_heads");
  if (a.seq_q <= 0 || a.batch <= 0) return;
  const int splits = decode_attention_splits(a);
  DecodeParams p{q, k, v, nullptr, nullptr,
                 int(a.batch), int(a.seq_q), int(a.seq_kv), int(a.heads), int(a.kv_heads),
                 int(a.group()), splits, 0, a.causal, a.scale()};
  p.split_len = int((a.seq_kv + splits - 1) / splits);
  const int64_t slots = int64_t(splits) * a.batch * a.heads * a.seq_q;
  p.part_acc = static_cast<float*>(workspace);
  p.part_ml = p.part_acc + slots * a.head_dim;
  const dim3 grid(unsigned(splits), unsigned(a.kv_heads), unsigned(a.batch));
  switch (a.head_dim) {
    case 32: decode_split_kernel<T, 32><<<grid, k_warps * 32, 0, stream>>>(p, rows); break;
    case 64: decode_split_kernel<T, 64><<<grid, k_warps * 32, 0, stream>>>(p, rows); break;
    case 128: decode_split_kernel<T, 128><<<grid, k_warps * 32, 0, stream>>>(p, rows); break;
    case 256: decode_split_kernel<T, 256><<<grid, k_warps * 32, 0, stream>>>(p, rows); break;
    default:
      throw ConfigError("decode_attention: head_dim " + std::to_string(a.head_dim) +
                        " unsupported (32, 64, 128 or 256)");
  }
  PERFSIM_CUDA_CHECK_LAUNCH();
  const int64_t out_rows = a.batch * a.heads * a.seq_q;
  constexpr int warps = 8;
  decode_combine_kernel<T><<<unsigned((out_rows + warps - 1) / warps), warps * 32, 0, stream>>>(
      p, int(a.head_dim), o, lse);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

int decode_attention_splits(const AttnShape& a) {
  const int64_t s = (a.seq_kv + k_split_target - 1) / k_split_target;
  return int(std::clamp<int64_t>(s, 1, k_max_splits));
}

int64_t decode_attention_workspace_bytes(const AttnShape& a) {
  const int64_t slots = int64_t(decode_attention_splits(a)) * a.batch * a.heads * a.seq_q;
  return slots * (a.head_dim + 2) * int64_t(sizeof(float));
}

template <class T>
void decode_attention(const T* q, const T* k, const T* v, T* o, float* lse, const AttnShape& a,
                      void* workspace, cudaStream_t stream) {
  if (a.seq_kv > a.kv_capacity) throw ConfigError("decode_attention: seq_kv exceeds kv_capacity");
  if (!split_kernel_head_dim(a.head_dim)) return flash_attention(q, k, v, o, lse, a, stream);
  launch_decode(q, k, v, o, lse, a, workspace, ContiguousRows{a.kv_capacity}, stream);
}

template <class T>
void paged_decode_attention(const T* q, const T* k_pages, const T* v_pages,
                            const int32_t* block_table, int block_size, int max_blocks, T* o,
                            float* lse, const AttnShape& a, void* workspace, cudaStream_t stream) {
  if (block_size <= 0 || int64_t(block_size) * max_blocks < a.seq_kv)
    throw ConfigError("paged_decode_attention: block_size·max_blocks must cover seq_kv");
  launch_decode(q, k_pages, v_pages, o, lse, a, workspace,
                PagedRows{block_table, block_size, max_blocks}, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_DECODE(T)                                                    \
  template void decode_attention<T>(const T*, const T*, const T*, T*, float*, const AttnShape&, \
                                    void*, cudaStream_t);                                     \
  template void paged_decode_attention<T>(const T*, const T*, const T*, const int32_t*, int, int, \
                                          T*, float*, const AttnShape&, void*, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_DECODE(float)
PERFSIM_CUDA_INSTANTIATE_DECODE(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_DECODE(__half)

}  // namespace perfsim::cuda
