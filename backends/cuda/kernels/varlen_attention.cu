// Varlen paged attention (varlen_attention.cuh): one launch per part of a serving step, decodes
// and prefill chunks of different lengths packed together.
//
// Decodes (the leading a.decode_seqs sequences, one query each): split-KV "flash decoding"
// (Dao et al. 2023) over a paged cache as in vLLM's PagedAttention. One CTA of 4 warps per
// (split, kv head, sequence); its rows are the queries of the kv head's whole GQA group, so
// each K/V row is read once per group. Each CTA keeps its unnormalized partial (acc[d], max,
// denominator) in shared memory; then either the C splits of a (sequence, kv head), one
// thread-block cluster (Hopper), merge them through distributed shared memory (no workspace,
// no second kernel), or each split writes its partial to the workspace and a combine kernel
// merges them (any number of splits). Lanes, loads and the online softmax are those of
// decode_attention.cu (a K/V row of d elements read by L lanes with 16-byte loads, 4 loads of
// K and of V in flight per lane); the block-table entries of a warp's next keys are fetched
// before the current keys' math, so the page lookup is off the loads' critical path.
// An fp8 cache (the fp8_kv pass) is read as stored, 16 elements per load, widened in
// registers; its scale folds into the softmax scale (K) and the partial accumulator (V).
//
// Prefill chunks (the other sequences, q_len ≥ 1 after kv_len − q_len cached keys): the
// FlashAttention-2 kernel of flash_attention.cu with a row policy that finds a sequence's
// queries through query_start and its keys through the block table.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_device.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/varlen_attention.cuh"
#include "core/errors.hpp"

namespace perfsim::cuda {

using namespace attn_detail;

namespace {

constexpr int k_warps = 4;
constexpr int k_unroll = 4;           // 16-byte loads of K (and of V) in flight per lane
constexpr int k_ctas_per_sm = 4;      // grid target of the split sizing
constexpr int k_min_split_len = 64;   // keys per split, at least
constexpr int k_max_split_len = 512;  // keys per split the sizing aims below (vLLM v2's partition)
constexpr int k_max_cluster = 8;      // CTAs of a portable cluster
constexpr int k_max_splits = 256;     // workspace mode
constexpr int k_combine_lanes = 8;    // split lanes per output column in the combine kernel

struct DecodeParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  const int32_t* table;
  const int32_t* kv_len;
  float* part_acc;  // workspace mode: [splits, seqs, H, d]
  float* part_ml;   // workspace mode: [splits, seqs, H, 2]
  int64_t tokens;
  int seqs, heads, kv_heads, group, max_blocks;
  detail::PageDivider pages;
  int split_len;  // workspace mode: keys per split, the same for every sequence
  float scale;    // 1/√d times K's scale (kv_scale_of)
  float v_scale;  // V's
};

bool decode_head_dim(int64_t d) { return d == 32 || d == 64 || d == 128 || d == 256; }

// kCluster: the splits of a (sequence, kv head) are one cluster and merge in distributed shared
// memory. Otherwise every split of every sequence covers p.split_len keys (CTAs past a
// sequence's keys exit at once, as in vLLM v2) and leaves a partial in the workspace for the
// combine kernel, except a sequence's only split, which writes O and LSE itself. Q and O are
// stored as T, K and V as Kv (T, or fp8 e4m3).
template <class T, class Kv, int D, int R, bool kCluster>
__global__ void __launch_bounds__(k_warps * 32) varlen_decode_kernel(DecodeParams p) {
  namespace cg = cooperative_groups;
  using Geo = SplitGeometry<T, Kv, D>;
  constexpr int L = Geo::L, E = Geo::E, P = Geo::P, G = Geo::G;
  __shared__ float red_acc[k_warps][R][D];  // per warp; row of warp 0 then the CTA's partial
  __shared__ float red_ml[k_warps][R][2];
  __shared__ float part_ml[R][2];           // the CTA's partial max and denominator
  const cg::cluster_group cluster = cg::this_cluster();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub = lane % L, grp = lane / L;  // element slice and key row of this lane
  const int split = blockIdx.x, splits = gridDim.x, kh = blockIdx.y, s = blockIdx.z;
  const int kv = p.kv_len[s];
  // Cluster: this CTA's share of the sequence's keys, 1/splits of them, at least
  // k_min_split_len, in multiples of 16 (later splits of a short sequence are empty).
  const int split_len = kCluster ? (max(k_min_split_len, (kv + splits - 1) / splits) + 15) / 16 * 16 : p.split_len;
  if (!kCluster && split * split_len >= kv) return;
  const bool direct = !kCluster && kv <= split_len;  // its sequence's only split
  const int j_begin = min(kv, split * split_len);
  const int j_end = min(kv, j_begin + split_len);
  const int64_t token = s;  // the decodes lead the step with one query each
  const int32_t* trow = p.table + int64_t(s) * p.max_blocks;
  const int64_t kv_stride = int64_t(p.kv_heads) * D;
  const Kv* k = static_cast<const Kv*>(p.k) + int64_t(kh) * D + sub * E;
  const Kv* v = static_cast<const Kv*>(p.v) + int64_t(kh) * D + sub * E;
  constexpr int chunk = G * k_unroll;  // keys per warp iteration

  for (int r0 = 0; r0 < p.group; r0 += R) {  // row r: head kh·group + r0 + r
    float qf[R][E], acc[R][E], m[R], l[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r0 + r < p.group) {
        const int h = kh * p.group + r0 + r;
        load_query<T, E, Geo::QP>(static_cast<const T*>(p.q) + (token * p.heads + h) * D + sub * E, p.scale, qf[r]);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) qf[r][e] = 0.f;
      }
      m[r] = -INFINITY;
      l[r] = 0.f;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[r][e] = 0.f;
    }

    // Pages of this lane's keys in the warp's next iteration.
    int page[k_unroll];
    auto locate = [&](int base) {
#pragma unroll
      for (int u = 0; u < k_unroll; ++u) {
        const int j = base + u * G + grp;
        page[u] = j < j_end ? __ldg(trow + p.pages.page(j)) : 0;
      }
    };
    locate(j_begin + warp * chunk);
    for (int base = j_begin + warp * chunk; base < j_end; base += k_warps * chunk) {
      uint4 kw[k_unroll][P], vw[k_unroll][P];
#pragma unroll
      for (int u = 0; u < k_unroll; ++u) {
        const int j = base + u * G + grp;
        if (j < j_end) {
          const int64_t row = p.pages.row(page[u], j);
          load_words<P>(k + row * kv_stride, kw[u]);
          load_words<P>(v + row * kv_stride, vw[u]);
        } else {
#pragma unroll
          for (int c = 0; c < P; ++c) kw[u][c] = vw[u][c] = make_uint4(0, 0, 0, 0);
        }
      }
      locate(base + k_warps * chunk);
      split_kv_step<Kv, R, k_unroll, E, P, L>(
          qf, kw, vw, p.group - r0, [&](int, int u) { return base + u * G + grp < j_end; }, m, l, acc);
    }

    // Sum the G row groups of the warp (they share the warp-wide max), then merge the warps
    // into the CTA's partial (red_acc[0], part_ml; a warp or CTA with no keys has max −inf).
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
      const int r = e / D, x = e % D;
      float mm = -INFINITY;
#pragma unroll
      for (int w = 0; w < k_warps; ++w) mm = fmaxf(mm, red_ml[w][r][0]);
      float a = 0.f, ll = 0.f;
#pragma unroll
      for (int w = 0; w < k_warps; ++w) {
        const float f = red_ml[w][r][0] == -INFINITY ? 0.f : expf(red_ml[w][r][0] - mm);
        a += red_acc[w][r][x] * f;
        ll += red_ml[w][r][1] * f;
      }
      red_acc[0][r][x] = a * p.v_scale;  // this thread alone reads and writes element (r, x)
      if (x == 0) part_ml[r][0] = mm, part_ml[r][1] = ll;
    }
    if constexpr (!kCluster) {
      __syncthreads();
      for (int e = threadIdx.x; e < R * D; e += k_warps * 32) {
        const int r = e / D, x = e % D;
        if (r0 + r >= p.group) continue;
        const int h = kh * p.group + r0 + r;
        const float a = red_acc[0][r][x], mm = part_ml[r][0], ll = part_ml[r][1];
        if (direct) {
          static_cast<T*>(p.o)[(token * p.heads + h) * D + x] = from_float<T>(a / ll);
          if (x == 0) p.lse[int64_t(h) * p.tokens + token] = mm + logf(ll);
        } else {
          const int64_t slot = (int64_t(split) * p.seqs + s) * p.heads + h;
          p.part_acc[slot * D + x] = a;
          if (x == 0) p.part_ml[slot * 2] = mm, p.part_ml[slot * 2 + 1] = ll;
        }
      }
      __syncthreads();  // red_* are rewritten by the next pass
      continue;
    }
    cluster.sync();  // every split's partial is ready (and visible to the cluster)

    // Merge the splits: M = max m_c, L = Σ l_c·e^(m_c−M), O = Σ acc_c·e^(m_c−M) / L,
    // LSE = M + ln L (the first split holds key 0, so M is finite). Split c writes the
    // elements c·128 + tid, c·128 + tid + splits·128, ...
    for (int e = split * k_warps * 32 + threadIdx.x; e < R * D; e += splits * k_warps * 32) {
      const int r = e / D, x = e % D;
      if (r0 + r >= p.group) continue;
      float mm = -INFINITY;
      for (int c = 0; c < splits; ++c) mm = fmaxf(mm, cluster.map_shared_rank(&part_ml[r][0], c)[0]);
      float a = 0.f, ll = 0.f;
      for (int c = 0; c < splits; ++c) {
        const float* ml = cluster.map_shared_rank(&part_ml[r][0], c);
        const float mc = ml[0];
        if (mc == -INFINITY) continue;  // a split past the sequence's keys
        const float f = expf(mc - mm);
        a += cluster.map_shared_rank(&red_acc[0][r][x], c)[0] * f;
        ll += ml[1] * f;
      }
      const int h = kh * p.group + r0 + r;
      static_cast<T*>(p.o)[(token * p.heads + h) * D + x] = from_float<T>(a / ll);
      if (x == 0) p.lse[int64_t(h) * p.tokens + token] = mm + logf(ll);
    }
    cluster.sync();  // the others' shared memory stays until they are read (and red_* reused)
  }
}

// Block (sequence·H + head, column tile): 32 output columns × k_combine_lanes lanes of splits:
// M = max m_s, L = Σ l_s·e^(m_s−M), O = Σ acc_s·e^(m_s−M) / L, LSE = M + ln L.
template <class T>
__global__ void __launch_bounds__(32 * k_combine_lanes) varlen_combine_kernel(DecodeParams p, int d) {
  __shared__ float weight[k_max_splits];
  __shared__ float red[k_combine_lanes][33];
  __shared__ float total[2];
  const int64_t row = blockIdx.x;
  const int s = int(row / p.heads), h = int(row % p.heads);
  const int n = (p.kv_len[s] + p.split_len - 1) / p.split_len;  // splits that wrote a partial
  if (n <= 1) return;  // its only split wrote O and LSE
  const int64_t rows = int64_t(p.seqs) * p.heads;
  const int tx = threadIdx.x, ty = threadIdx.y;
  if (ty == 0) {
    float mm = -INFINITY;
    for (int sp = tx; sp < n; sp += 32) mm = fmaxf(mm, p.part_ml[(sp * rows + row) * 2]);
    mm = warp_max(mm);
    float ll = 0.f;
    for (int sp = tx; sp < n; sp += 32) {
      const float f = expf(p.part_ml[(sp * rows + row) * 2] - mm);
      weight[sp] = f;
      ll += p.part_ml[(sp * rows + row) * 2 + 1] * f;
    }
    ll = warp_sum(ll);
    if (tx == 0) total[0] = mm, total[1] = ll;
  }
  __syncthreads();
  const float mm = total[0], ll = total[1];
  const int x = blockIdx.y * 32 + tx;
  float a = 0.f;
#pragma unroll 4
  for (int sp = ty; sp < n; sp += k_combine_lanes) a += p.part_acc[(sp * rows + row) * d + x] * weight[sp];
  red[ty][tx] = a;
  __syncthreads();
  if (ty != 0) return;
  float sum = 0.f;
#pragma unroll
  for (int y = 0; y < k_combine_lanes; ++y) sum += red[y][tx];
  const int64_t token = s;
  static_cast<T*>(p.o)[(token * p.heads + h) * d + x] = from_float<T>(sum / ll);
  if (blockIdx.y == 0 && tx == 0) p.lse[int64_t(h) * p.tokens + token] = mm + logf(ll);
}

// Splits of the workspace mode: enough CTAs for k_ctas_per_sm per SM, no split under
// k_min_split_len keys, none over k_max_split_len where k_max_splits allow.
int workspace_splits(const ops::VarlenAttnShape& a) {
  if (a.decode_seqs <= 0 || !decode_head_dim(a.head_dim)) return 1;
  const int64_t ctas = std::max<int64_t>(1, a.decode_seqs * a.kv_heads);
  const int64_t target = int64_t(detail::sm_count()) * k_ctas_per_sm;
  const int64_t by_grid = (target + ctas - 1) / ctas;
  const int64_t by_len = (a.max_kv + k_min_split_len - 1) / k_min_split_len;
  const int64_t longest = (a.max_kv + k_max_split_len - 1) / k_max_split_len;
  return int(std::clamp<int64_t>(std::max(std::min(by_grid, by_len), longest), 1, k_max_splits));
}

template <class T, class Kv>
void launch_decode(const T* q, const Kv* k_pages, const Kv* v_pages, const int32_t* table,
                   const int32_t* kv_len, T* o, float* lse, const ops::VarlenAttnShape& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  const float kv_scale = kv_scale_of<T, Kv>(a.kv, "varlen flash_attention");
  DecodeParams p{q, k_pages, v_pages, o, lse, table, kv_len, nullptr, nullptr, a.tokens,
                 int(a.decode_seqs), int(a.heads), int(a.kv_heads), int(a.group()), int(a.paged.max_blocks),
                 detail::PageDivider::make(a.paged.block), 0, a.scale() * kv_scale, kv_scale};
  // Workspace mode when the workspace holds the partials of at least 2 splits.
  const int64_t per_split = a.decode_seqs * a.heads * (a.head_dim + 2) * int64_t(sizeof(float));
  int ws_splits = std::min<int64_t>(workspace_splits(a), workspace == nullptr ? 0 : workspace_bytes / per_split);
  const bool use_cluster = ws_splits < 2;
  const int splits = use_cluster ? varlen_decode_splits(a) : ws_splits;
  if (!use_cluster) {
    p.split_len = int((std::max<int64_t>(a.max_kv, 1) + splits - 1) / splits);
    p.part_acc = static_cast<float*>(workspace);
    p.part_ml = p.part_acc + int64_t(splits) * a.decode_seqs * a.heads * a.head_dim;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(splits), unsigned(a.kv_heads), unsigned(a.decode_seqs));
  cfg.blockDim = dim3(k_warps * 32);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = unsigned(splits);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cfg.attrs = &cluster;
  cfg.numAttrs = use_cluster ? 1 : 0;
  const int64_t group = a.group();
  auto launch = [&](auto d_c, auto c_c) {
    constexpr int D = decltype(d_c)::value;
    constexpr bool C = decltype(c_c)::value;
    // Rows per pass: an fp8 lane holds 16 elements of each row's query and accumulator (a bf16
    // lane 8), so 8 rows would spill; a group of 8 takes two passes of 4 (the second reads K/V
    // again, mostly from L2).
    constexpr int R_max = kv_is_fp8<T, Kv> ? 4 : 8;
    if (group == 1) PERFSIM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, varlen_decode_kernel<T, Kv, D, 1, C>, p));
    else if (group <= 4) PERFSIM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, varlen_decode_kernel<T, Kv, D, 4, C>, p));
    else PERFSIM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, varlen_decode_kernel<T, Kv, D, R_max, C>, p));
  };
  auto launch_d = [&](auto c_c) {
    switch (a.head_dim) {
      case 32: launch(std::integral_constant<int, 32>{}, c_c); break;
      case 64: launch(std::integral_constant<int, 64>{}, c_c); break;
      case 128: launch(std::integral_constant<int, 128>{}, c_c); break;
      default: launch(std::integral_constant<int, 256>{}, c_c); break;
    }
  };
  if (use_cluster) launch_d(std::true_type{});
  else launch_d(std::false_type{});
  PERFSIM_CUDA_CHECK_LAUNCH();
  if (use_cluster) return;
  varlen_combine_kernel<T><<<dim3(unsigned(a.decode_seqs * a.heads), unsigned(a.head_dim / 32)),
                             dim3(32, k_combine_lanes), 0, stream>>>(p, int(a.head_dim));
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t varlen_attention_workspace_bytes(const ops::VarlenAttnShape& a) {
  const int splits = workspace_splits(a);
  return splits < 2 ? 0 : int64_t(splits) * a.decode_seqs * a.heads * (a.head_dim + 2) * int64_t(sizeof(float));
}

int varlen_decode_splits(const ops::VarlenAttnShape& a) {
  if (a.decode_seqs <= 0 || !decode_head_dim(a.head_dim)) return 1;
  // Enough CTAs (splits × kv heads × decodes) to fill every SM k_ctas_per_sm times, no split
  // shorter than k_min_split_len keys, and splits of the longest context short enough that
  // it is not left running alone; a cluster holds at most k_max_cluster of them.
  const int64_t ctas = std::max<int64_t>(1, a.decode_seqs * a.kv_heads);
  const int64_t target = int64_t(detail::sm_count()) * k_ctas_per_sm;
  const int64_t by_grid = (target + ctas - 1) / ctas;
  const int64_t by_len = (a.max_kv + k_min_split_len - 1) / k_min_split_len;
  const int64_t longest = (a.max_kv + k_max_split_len - 1) / k_max_split_len;
  return int(std::clamp<int64_t>(std::max(std::min(by_grid, by_len), longest), 1, k_max_cluster));
}

template <class T, class Kv>
void varlen_flash_attention(const T* q, const Kv* k_pages, const Kv* v_pages, const int32_t* table,
                            const int32_t* query_start, const int32_t* kv_len, T* o, float* lse,
                            const ops::VarlenAttnShape& a, cudaStream_t stream, void* workspace,
                            int64_t workspace_bytes) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw ConfigError("varlen flash_attention: heads (" + std::to_string(a.heads) +
                      ") must be a positive multiple of kv_heads (" + std::to_string(a.kv_heads) + ")");
  if (a.head_dim <= 0 || a.head_dim > 256)
    throw ConfigError("varlen flash_attention: head_dim " + std::to_string(a.head_dim) + " unsupported on CUDA (1..256)");
  if (a.paged.block <= 0 || a.paged.max_blocks <= 0)
    throw ConfigError("varlen flash_attention: needs a paged cache (block and max_blocks positive)");
  if (a.decode_seqs < 0 || a.decode_seqs > a.seqs)
    throw ConfigError("varlen flash_attention: decode_seqs outside 0..seqs");
  if (a.seqs <= 0 || a.tokens <= 0) return;
  int64_t first_prefill = 0;
  if (a.decode_seqs > 0 && decode_head_dim(a.head_dim)) {
    launch_decode(q, k_pages, v_pages, table, kv_len, o, lse, a, workspace, workspace_bytes, stream);
    first_prefill = a.decode_seqs;
  }
  detail::varlen_flash_prefill(q, k_pages, v_pages, table, query_start, kv_len, o, lse, a, first_prefill, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_VARLEN_ATTN(T, Kv)                                                          \
  template void varlen_flash_attention<T, Kv>(const T*, const Kv*, const Kv*, const int32_t*, const int32_t*, \
                                              const int32_t*, T*, float*, const ops::VarlenAttnShape&,      \
                                              cudaStream_t, void*, int64_t);
PERFSIM_CUDA_INSTANTIATE_VARLEN_ATTN(float, float)
PERFSIM_CUDA_INSTANTIATE_VARLEN_ATTN(__nv_bfloat16, __nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_VARLEN_ATTN(__half, __half)
// An fp8 KV cache under bf16/fp16 attention.
PERFSIM_CUDA_INSTANTIATE_VARLEN_ATTN(__nv_bfloat16, __nv_fp8_e4m3)
PERFSIM_CUDA_INSTANTIATE_VARLEN_ATTN(__half, __nv_fp8_e4m3)

}  // namespace perfsim::cuda
