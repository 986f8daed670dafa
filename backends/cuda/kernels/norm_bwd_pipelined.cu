// Pipelined backward of RMSNorm and LayerNorm (the fast path of rmsnorm_bwd/layernorm_bwd for
// 16-byte-aligned rows): x, dy, dx [rows, cols]; gamma [cols]; partial [P or 2P, cols] fp32.
// Persistent blocks (two per SM) each own a fixed range of rows, walked in steps of one or two
// rows that share one block reduction. Rows are staged through a ring of shared-memory buffers by
// cp.async, `stages - 1` steps ahead of the step being reduced, so DRAM keeps ~100 KiB per SM
// in flight through the block barriers (a register prefetch of one row ahead left too little
// in flight: 66-79% of a copy). Each thread copies and later reads back only its own 16-byte
// packs, so the ring needs no block barrier. gamma and the dgamma/dbeta partials live in
// registers (LayerNorm at one pack per thread keeps gamma in shared memory instead; at two
// packs and one row per step it keeps the widened row in registers across the reduction).
// Blocks may be launched as thread-block clusters of C blocks that add their partials through
// distributed shared memory at the end: one partial row per cluster and statistic (C times
// fewer to write, re-read and sum), summed in a fixed order by detail::sum_partials.
#include <cooperative_groups.h>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

namespace perfsim::cuda {

namespace {

constexpr int k_max_threads = 512;
constexpr int k_rows_per_step = 2;         // RMSNorm rows per block reduction (1 → 2: +2-4%)
constexpr int k_rows_per_step_layer = 1;   // LayerNorm (2 → 1 at clusters of 2: +6-10%)
constexpr int k_max_stages = 4;
constexpr int k_smem_budget = 96 << 10;    // ring bytes per block: two blocks fit in 228 KiB
constexpr int k_blocks_per_sm = 2;         // more would multiply the partial rows to sum
constexpr int k_max_cluster = 4;           // blocks per cluster that add their partials
constexpr int k_cluster_layer = 2;         // LayerNorm cluster size (1 → 2: +11-14% of a copy)
constexpr int k_cluster_rms = 1;           // RMSNorm (2 or 4: −1 to −5%)
// Packs per thread (template N): 1 (rows up to 512·16 B = 8 KiB) or 2 (16 KiB).

// Block p owns rows [p·rows/P, (p+1)·rows/P). Partials: one row per cluster q of C blocks
// (C = 1 without clusters), dgamma rows [0, Q), dbeta [Q, 2Q), Q = P / C.
// Layer: LayerNorm (mean subtracted, dbeta too); otherwise RMSNorm. R rows per step share one
// block reduction (half the barriers and shuffle chains per row at R = 2): a stage of the ring
// holds the x and dy rows of one step. Values are re-read from shared memory after the
// reduction rather than kept in registers across it.
template <class T, int V, int N, int R, bool Layer>
__global__ void __launch_bounds__(k_max_threads, N == 1 ? 2 : 1) norm_bwd_pipe_kernel(
    const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ dy,
    T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t cols, float eps,
    int stages) {
  using Pk = detail::Pack<T, V>;
  using Slice = detail::RowSlice<T, V, N>;
  constexpr int K = Layer ? 4 : 2;         // statistics per row
  // LayerNorm at one pack per thread (64 registers) reads gamma from shared memory; with two
  // packs registers are not the limit, and gamma in registers saves a widening per use.
  constexpr bool gamma_smem = Layer && N == 1;
  // LayerNorm at two packs and one row per step keeps the widened row (32 floats) in registers
  // across the block reduction instead of re-reading and re-widening it: the kernel is
  // issue-bound there (schedulers issue in ~65% of cycles), registers are not.
  constexpr bool keep = Layer && N == 2 && R == 1;
  extern __shared__ __align__(16) unsigned char ring_bytes[];
  Pk* ring = reinterpret_cast<Pk*>(ring_bytes);  // [stages][R][2][units]: x, then dy, of a row
  const int64_t units = cols / V;
  Pk* gsm = ring + static_cast<int64_t>(stages) * R * 2 * units;  // [units] gamma (gamma_smem)
  const int64_t parts = gridDim.x, p = blockIdx.x;
  const int64_t r0 = p * rows / parts, r1 = (p + 1) * rows / parts;
  const int tid = threadIdx.x, nt = blockDim.x;
  auto row_x = [&](int s, int j) { return ring + (static_cast<int64_t>(s) * R + j) * 2 * units; };

  // Copies the rows of step `r` (first row) that this block owns into stage s; always commits
  // a group, so the count of groups in flight is the same in every step.
  auto issue = [&](int64_t r, int s) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      if (r + j >= r1) break;
      Pk* sx = row_x(s, j);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const int64_t u = tid + static_cast<int64_t>(k) * nt;
        if (u < units) {
          detail::cp_async16(sx + u, x + (r + j) * cols + u * V);
          detail::cp_async16(sx + units + u, dy + (r + j) * cols + u * V);
        }
      }
    }
    detail::cp_async_commit();
  };
  for (int j = 0; j + 1 < stages; ++j) issue(r0 + int64_t{j} * R, j);

  float g[gamma_smem ? 1 : N][V], pg[N][V], pb[Layer ? N : 1][V];
  {
    Slice gs;
    gs.load(gamma, cols, tid, nt);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if constexpr (gamma_smem) {
        // Read back by this thread only: no barrier.
        if (Slice::in_row(tid, nt, k, cols)) gsm[tid + static_cast<int64_t>(k) * nt] = gs.p[k];
      }
#pragma unroll
      for (int i = 0; i < V; ++i) {
        if constexpr (!gamma_smem) g[k][i] = gs.at(k, i);
        pg[k][i] = 0.0f;
        if constexpr (Layer) pb[k][i] = 0.0f;
      }
    }
  }
  // Element (k, i) of row j of stage s, as float: x (d = 0) or dy (d = 1); 0 past the row.
  auto load = [&](int s, int j, int d, int k, float (&out)[V]) {
    const int64_t u = tid + static_cast<int64_t>(k) * nt;
    Pk a{};
    if (u < units) a = row_x(s, j)[d * units + u];
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = detail::to_f32(a.v[i]);
  };
  // gamma of pack k, as float (registers, or shared memory for LayerNorm).
  auto gam = [&](int k, float (&out)[V]) {
    if constexpr (gamma_smem) {
      const int64_t u = tid + static_cast<int64_t>(k) * nt;
      Pk a{};
      if (u < units) a = gsm[u];
#pragma unroll
      for (int i = 0; i < V; ++i) out[i] = detail::to_f32(a.v[i]);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) out[i] = g[k][i];
    }
  };
  const float inv_cols = 1.0f / static_cast<float>(cols);
  // LayerNorm's shifts (see below), loaded one step ahead so that their latency hides behind
  // a whole step instead of stalling the next one.
  float shift[R], next_shift[R];
#pragma unroll
  for (int j = 0; j < R; ++j) next_shift[j] = Layer && r0 + j < r1 ? detail::to_f32(x[(r0 + j) * cols]) : 0.0f;
  int s = 0;  // stage of the step starting at row r
  for (int64_t r = r0; r < r1; r += R) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      shift[j] = next_shift[j];
      next_shift[j] = Layer && r + R + j < r1 ? detail::to_f32(x[(r + R + j) * cols]) : 0.0f;
    }
    issue(r + int64_t{stages - 1} * R, s == 0 ? stages - 1 : s - 1);  // the stage step r−R used
    detail::cp_async_wait(stages - 1);                                  // step r has landed

    // LayerNorm: one reduction for all statistics, shifted by the row's first element (any
    // sample of the row keeps the one-pass variance free of cancellation when |mean| ≫ std).
    // Σ x−K, Σ (x−K)², Σ g, Σ g·(x−K) with g = dy ⊙ gamma; RMSNorm: Σ x², Σ g·x.
    float acc[R * K] = {};
    float hx[keep ? N : 1][V], hd[keep ? N : 1][V];  // the widened row (keep)
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!Slice::in_row(tid, nt, k, cols)) continue;  // zero-filled x would count −K
      float gk[V];
      gam(k, gk);
#pragma unroll
      for (int j = 0; j < R; ++j) {
        float xv[V], dv[V];
        load(s, j, 0, k, xv);
        load(s, j, 1, k, dv);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          if constexpr (keep) hx[k][i] = xv[i], hd[k][i] = dv[i];
          const float xk = xv[i] - shift[j], gv = dv[i] * gk[i];
          if constexpr (Layer) {
            acc[j * K + 0] += xk;
            acc[j * K + 1] += xk * xk;
            acc[j * K + 2] += gv;
            acc[j * K + 3] += gv * xk;
          } else {
            acc[j * K + 0] += xk * xk;
            acc[j * K + 1] += gv * xk;
          }
        }
      }
    }
    detail::block_sum(acc);
    float mean[R], rstd[R], mg[R], mgx[R];
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const float* a = acc + j * K;
      if constexpr (Layer) {
        const float mk = a[0] * inv_cols;  // mean − K
        mean[j] = shift[j] + mk;
        rstd[j] = 1.0f / sqrtf(fmaxf(a[1] * inv_cols - mk * mk, 0.0f) + eps);
        mg[j] = a[2] * inv_cols;
        mgx[j] = (a[3] - mk * a[2]) * rstd[j] * inv_cols;  // Σ g·(x−mean) = Σ g·(x−K) − (mean−K)·Σ g
      } else {
        mean[j] = 0.0f;
        mg[j] = 0.0f;
        rstd[j] = 1.0f / sqrtf(a[0] * inv_cols + eps);
        mgx[j] = a[1] * rstd[j] * inv_cols;
      }
    }
    // dx = rstd · (g − mean(g) − x̂·mean(g ⊙ x̂)); RMSNorm has no mean(g) term.
    float c1[R], c2[R];
#pragma unroll
    for (int j = 0; j < R; ++j) c1[j] = -rstd[j] * mg[j], c2[j] = rstd[j] * mgx[j];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!Slice::in_row(tid, nt, k, cols)) continue;
      float gk[V];
      gam(k, gk);
#pragma unroll
      for (int j = 0; j < R; ++j) {
        if (r + j >= r1) break;
        float xv[V], dv[V], o[V];
        if constexpr (keep) {
#pragma unroll
          for (int i = 0; i < V; ++i) xv[i] = hx[k][i], dv[i] = hd[k][i];
        } else {
          load(s, j, 0, k, xv);
          load(s, j, 1, k, dv);
        }
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float xh = (xv[i] - mean[j]) * rstd[j];
          if constexpr (Layer)  // rstd·(dv·g) + (−rstd·mg − xh·rstd·mgx): 3 instead of 4 ops
            o[i] = fmaf(dv[i] * gk[i], rstd[j], fmaf(-xh, c2[j], c1[j]));
          else
            o[i] = rstd[j] * (dv[i] * gk[i] - mg[j] - xh * mgx[j]);
          pg[k][i] += dv[i] * xh;
          if constexpr (Layer) pb[k][i] += dv[i];
        }
        detail::store_f32<T, V>(dx + (r + j) * cols + Slice::col(tid, nt, k, 0), o);
      }
    }
    s = s + 1 == stages ? 0 : s + 1;
  }
  detail::cp_async_wait(0);  // nothing may land in shared memory after the block exits
  // Let sum_partials (launched with programmatic stream serialization) start its launch now;
  // it waits for this grid's completion before reading the partials.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int64_t csize = cluster.num_blocks(), rank = cluster.block_rank();
  const int64_t groups = parts / csize, q = p / csize;  // partial rows per statistic; this one
  if (csize == 1) {
    Slice::store(partial + q * cols, pg, tid, nt, cols);
    if constexpr (Layer) Slice::store(partial + (groups + q) * cols, pb, tid, nt, cols);
    return;
  }
  // Cluster: each block parks its partials in its (now idle) ring, [dgamma cols | dbeta cols];
  // block `rank` then adds columns [rank·cols/C, (rank+1)·cols/C) of all C blocks in rank
  // order (fixed: deterministic), reading the others' shared memory, and writes them once.
  __syncthreads();  // every thread of this block is done reading the ring
  float* park = reinterpret_cast<float*>(ring_bytes);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (!Slice::in_row(tid, nt, k, cols)) continue;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      park[Slice::col(tid, nt, k, i)] = pg[k][i];
      if constexpr (Layer) park[cols + Slice::col(tid, nt, k, i)] = pb[k][i];
    }
  }
  cluster.sync();  // all partials of the cluster parked and visible
  const int64_t quads = cols / 4;  // cols is a multiple of V ≥ 4
  const int64_t c0 = rank * quads / csize, c1 = (rank + 1) * quads / csize;
  const float4* src[k_max_cluster];
#pragma unroll
  for (int b = 0; b < k_max_cluster; ++b)
    src[b] = reinterpret_cast<const float4*>(cluster.map_shared_rank(park, b < csize ? b : 0));
  constexpr int stats = Layer ? 2 : 1;
#pragma unroll
  for (int st = 0; st < stats; ++st) {
    float4* dst = reinterpret_cast<float4*>(partial + (st * groups + q) * cols);
    for (int64_t c = c0 + tid; c < c1; c += nt) {
      float4 v[k_max_cluster];
#pragma unroll
      for (int b = 0; b < k_max_cluster; ++b)
        if (b < csize) v[b] = src[b][st * quads + c];  // all loads in flight, then the sum
      float4 t = v[0];
#pragma unroll
      for (int b = 1; b < k_max_cluster; ++b)
        if (b < csize) t.x += v[b].x, t.y += v[b].y, t.z += v[b].z, t.w += v[b].w;
      dst[c] = t;
    }
  }
  cluster.sync();  // keep this block's shared memory alive until the others have read it
}

// Blocks per SM and per cluster-launch of one configuration, queried once (host queries are
// slow next to a 100 µs kernel timed from the host).
struct Fit {
  int threads = 0, clusters = 0;
  size_t smem = 0;
  int per_sm = 0, max_clusters = 0;
};

template <class T, int N, int R, bool Layer>
int64_t launch(const T* x, const T* gamma, const T* dy, T* dx, float* partial, int64_t rows,
               int64_t cols, float eps, int max_per_sm, int csize, cudaStream_t stream) {
  constexpr int V = detail::vec_of<T>;
  const int t = detail::reg_row_threads(cols / V, N, k_max_threads);
  const int64_t stage_bytes = int64_t{R} * 2 * cols * static_cast<int64_t>(sizeof(T));
  const int64_t fit = k_smem_budget / stage_bytes;
  const int stages = static_cast<int>(fit < k_max_stages ? fit : k_max_stages);
  if (t == 0 || stages < 2) return 0;
  const auto kernel = norm_bwd_pipe_kernel<T, V, N, R, Layer>;
  static const bool opted_in = [&] {  // once per instantiation: host attributes, capturable
    // The ring, plus gamma (LayerNorm: at most k_max_threads·N packs of 16 bytes).
    PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            k_smem_budget + k_max_threads * N * 16));
    // All of the unified L1/shared storage as shared memory, so that the rings of
    // blocks_per_sm blocks really fit side by side (the driver may otherwise pick a carveout
    // that holds one).
    PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)opted_in;
  const auto smem = static_cast<size_t>(stages * stage_bytes + (Layer && N == 1 ? cols * static_cast<int64_t>(sizeof(T)) : 0));
  // The cluster parks its [1 or 2, cols] fp32 partials in the ring (always large enough:
  // two stages of one row of x and dy hold 4·cols·sizeof(T) ≥ 8·cols bytes).
  if (csize < 1 || csize > k_max_cluster || rows < csize) csize = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(static_cast<unsigned>(t));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(csize);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = csize > 1 ? 1 : 0;
  static thread_local Fit cached;
  if (cached.threads != t || cached.smem != smem || cached.clusters != csize) {
    cached = Fit{t, csize, smem, detail::blocks_per_sm(kernel, t, smem), 0};
    if (csize > 1) {
      cfg.gridDim = dim3(static_cast<unsigned>(csize));
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) n = 0;
      cached.max_clusters = n;
    }
  }
  if (csize > 1 && cached.max_clusters < 1) csize = 1, cfg.numAttrs = 0;
  int per_sm = cached.per_sm < max_per_sm ? cached.per_sm : max_per_sm;
  int64_t parts = detail::norm_bwd_blocks(rows);
  int64_t resident = int64_t(detail::sm_count()) * per_sm;
  if (csize > 1 && int64_t{cached.max_clusters} * csize < resident) resident = int64_t{cached.max_clusters} * csize;
  parts = parts < resident ? parts : resident;
  // As few blocks as give the same rows per block: no straggler block, fewer partials.
  const int64_t per_block = (rows + parts - 1) / parts;
  parts = (rows + per_block - 1) / per_block;
  parts = parts / csize * csize;  // whole clusters (rows ≥ csize: at least one)
  cfg.gridDim = dim3(static_cast<unsigned>(parts));
  PERFSIM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, gamma, dy, dx, partial, rows, cols, eps, stages));
  return parts / csize;
}

template <class T, bool Layer>
int64_t launch_packs(const T* x, const T* gamma, const T* dy, T* dx, float* partial, int64_t rows,
                     int64_t cols, float eps, int per_sm, int per_step, int packs, int csize,
                     cudaStream_t stream) {
  // RMSNorm: one pack per thread when the row fits in k_max_threads, twice the warps per SM
  // to hide each row's reduction latency (bf16 4096: 90% of a copy, 83% with two packs).
  // LayerNorm: two packs, one row per step, clusters of 2 (87%; one pack: 59-68% even with
  // gamma in shared memory, its four statistics per row at 64 registers issue too slowly).
  if (packs == 0)
    packs = !Layer && detail::reg_row_threads(cols / detail::vec_of<T>, 1, k_max_threads) > 0 ? 1 : 2;
  if (packs == 1)
    return per_step == 1 ? launch<T, 1, 1, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, csize, stream)
                         : launch<T, 1, 2, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, csize, stream);
  return per_step == 1 ? launch<T, 2, 1, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, csize, stream)
                       : launch<T, 2, 2, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, csize, stream);
}

}  // namespace

template <class T>
int64_t detail::norm_bwd_pipelined(bool layer, const T* x, const T* gamma, const T* dy, T* dx,
                                   float* partial, int64_t rows, int64_t cols, float eps,
                                   cudaStream_t stream, int blocks_per_sm, int rows_per_step,
                                   int packs, int cluster) {
  if (cols % vec_of<T> != 0 || !aligned(16, x, gamma, dy, dx)) return 0;
  const int per_sm = blocks_per_sm > 0 ? blocks_per_sm : k_blocks_per_sm;
  const int per_step = rows_per_step > 0 ? rows_per_step : (layer ? k_rows_per_step_layer : k_rows_per_step);
  const int csize = cluster > 0 ? cluster : (layer ? k_cluster_layer : k_cluster_rms);
  return layer ? launch_packs<T, true>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, per_step, packs, csize, stream)
               : launch_packs<T, false>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, per_step, packs, csize, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(T)                                           \
  template int64_t detail::norm_bwd_pipelined<T>(bool, const T*, const T*, const T*, T*, float*, \
                                                 int64_t, int64_t, float, cudaStream_t, int, int, int, \
                                                 int);
PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(float)
PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(__half)

}  // namespace perfsim::cuda
