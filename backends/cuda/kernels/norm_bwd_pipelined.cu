// Pipelined backward of RMSNorm and LayerNorm (the fast path of rmsnorm_bwd/layernorm_bwd for
// 16-byte-aligned rows): x, dy, dx [rows, cols]; gamma [cols]; partial [P or 2P, cols] fp32.
// Persistent blocks (two per SM) each own a fixed range of rows, walked in steps of two rows
// that share one block reduction. Rows are staged through a ring of shared-memory buffers by
// cp.async, `stages - 1` steps ahead of the step being reduced, so DRAM keeps ~100 KiB per SM
// in flight through the block barriers (a register prefetch of one row ahead left too little
// in flight: 66-79% of a copy). Each thread copies and later reads back only its own 16-byte
// packs, so the ring needs no block barrier. gamma and the dgamma/dbeta partials live in
// registers: one global write per column per block at the end, summed in a fixed order by
// detail::sum_partials.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "backends/cuda/kernels/row_regs.cuh"

namespace perfsim::cuda {

namespace {

constexpr int k_max_threads = 512;
constexpr int k_rows_per_step = 2;         // rows per block reduction (1 → 2: +7-10% of a copy)
constexpr int k_max_stages = 4;
constexpr int k_smem_budget = 96 << 10;    // ring bytes per block: two blocks fit in 228 KiB
constexpr int k_blocks_per_sm = 2;         // more would multiply the partial rows to sum
// Packs per thread (template N): 1 (rows up to 512·16 B = 8 KiB) or 2 (16 KiB).

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

// Block p owns rows [p·rows/P, (p+1)·rows/P); partials: dgamma rows [0, P), dbeta [P, 2P).
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
  constexpr int K = Layer ? 4 : 2;  // statistics per row
  extern __shared__ __align__(16) unsigned char ring_bytes[];
  Pk* ring = reinterpret_cast<Pk*>(ring_bytes);  // [stages][R][2][units]: x, then dy, of a row
  const int64_t units = cols / V;
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
          cp_async16(sx + u, x + (r + j) * cols + u * V);
          cp_async16(sx + units + u, dy + (r + j) * cols + u * V);
        }
      }
    }
    cp_async_commit();
  };
  for (int j = 0; j + 1 < stages; ++j) issue(r0 + int64_t{j} * R, j);

  float g[N][V], pg[N][V], pb[N][V];
  {
    Slice gs;
    gs.load(gamma, cols, tid, nt);
#pragma unroll
    for (int k = 0; k < N; ++k)
#pragma unroll
      for (int i = 0; i < V; ++i) g[k][i] = gs.at(k, i), pg[k][i] = pb[k][i] = 0.0f;
  }
  // Element (k, i) of row j of stage s, as float: x (d = 0) or dy (d = 1); 0 past the row.
  auto load = [&](int s, int j, int d, int k, float (&out)[V]) {
    const int64_t u = tid + static_cast<int64_t>(k) * nt;
    Pk a{};
    if (u < units) a = row_x(s, j)[d * units + u];
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = detail::to_f32(a.v[i]);
  };
  const float inv_cols = 1.0f / static_cast<float>(cols);
  int s = 0;  // stage of the step starting at row r
  for (int64_t r = r0; r < r1; r += R) {
    // LayerNorm's shifts (see below): scalar loads, in flight during the wait.
    float shift[R];
#pragma unroll
    for (int j = 0; j < R; ++j) shift[j] = Layer && r + j < r1 ? detail::to_f32(x[(r + j) * cols]) : 0.0f;
    issue(r + int64_t{stages - 1} * R, s == 0 ? stages - 1 : s - 1);  // the stage step r−R used
    cp_async_wait(stages - 1);                                          // step r has landed

    // LayerNorm: one reduction for all statistics, shifted by the row's first element (any
    // sample of the row keeps the one-pass variance free of cancellation when |mean| ≫ std).
    // Σ x−K, Σ (x−K)², Σ g, Σ g·(x−K) with g = dy ⊙ gamma; RMSNorm: Σ x², Σ g·x.
    float acc[R * K] = {};
#pragma unroll
    for (int j = 0; j < R; ++j) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        if (!Slice::in_row(tid, nt, k, cols)) continue;  // zero-filled x would count −K
        float xv[V], dv[V];
        load(s, j, 0, k, xv);
        load(s, j, 1, k, dv);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float xk = xv[i] - shift[j], gv = dv[i] * g[k][i];
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
#pragma unroll
    for (int j = 0; j < R; ++j) {
      if (r + j >= r1) break;
      const float* a = acc + j * K;
      float mean = 0.0f, rstd, mg = 0.0f, mgx;
      if constexpr (Layer) {
        const float mk = a[0] * inv_cols;  // mean − K
        mean = shift[j] + mk;
        rstd = 1.0f / sqrtf(fmaxf(a[1] * inv_cols - mk * mk, 0.0f) + eps);
        mg = a[2] * inv_cols;
        mgx = (a[3] - mk * a[2]) * rstd * inv_cols;  // Σ g·(x−mean) = Σ g·(x−K) − (mean−K)·Σ g
      } else {
        rstd = 1.0f / sqrtf(a[0] * inv_cols + eps);
        mgx = a[1] * rstd * inv_cols;
      }
      // dx = rstd · (g − mean(g) − x̂·mean(g ⊙ x̂)); RMSNorm has no mean(g) term.
#pragma unroll
      for (int k = 0; k < N; ++k) {
        if (!Slice::in_row(tid, nt, k, cols)) continue;
        float xv[V], dv[V], o[V];
        load(s, j, 0, k, xv);
        load(s, j, 1, k, dv);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float xh = (xv[i] - mean) * rstd;
          o[i] = rstd * (dv[i] * g[k][i] - mg - xh * mgx);
          pg[k][i] += dv[i] * xh;
          if constexpr (Layer) pb[k][i] += dv[i];
        }
        detail::store_f32<T, V>(dx + (r + j) * cols + Slice::col(tid, nt, k, 0), o);
      }
    }
    s = s + 1 == stages ? 0 : s + 1;
  }
  cp_async_wait(0);  // nothing may land in shared memory after the block exits
  // Let sum_partials (launched with programmatic stream serialization) start its launch now;
  // it waits for this grid's completion before reading the partials.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  float* prow_g = partial + p * cols;
  float* prow_b = partial + (parts + p) * cols;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (!Slice::in_row(tid, nt, k, cols)) continue;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      prow_g[Slice::col(tid, nt, k, i)] = pg[k][i];
      if constexpr (Layer) prow_b[Slice::col(tid, nt, k, i)] = pb[k][i];
    }
  }
}

template <class T, int N, int R, bool Layer>
int64_t launch(const T* x, const T* gamma, const T* dy, T* dx, float* partial, int64_t rows,
               int64_t cols, float eps, int max_per_sm, cudaStream_t stream) {
  constexpr int V = detail::vec_of<T>;
  const int t = detail::reg_row_threads(cols / V, N, k_max_threads);
  const int64_t stage_bytes = int64_t{R} * 2 * cols * static_cast<int64_t>(sizeof(T));
  const int64_t fit = k_smem_budget / stage_bytes;
  const int stages = static_cast<int>(fit < k_max_stages ? fit : k_max_stages);
  if (t == 0 || stages < 2) return 0;
  const auto kernel = norm_bwd_pipe_kernel<T, V, N, R, Layer>;
  static const bool opted_in = [&] {  // once per instantiation: host attributes, capturable
    PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            k_smem_budget));
    // All of the unified L1/shared storage as shared memory, so that the rings of
    // blocks_per_sm blocks really fit side by side (the driver may otherwise pick a carveout
    // that holds one).
    PERFSIM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)opted_in;
  const auto smem = static_cast<size_t>(stages * stage_bytes);
  int per_sm = detail::blocks_per_sm(kernel, t, smem);
  per_sm = per_sm < max_per_sm ? per_sm : max_per_sm;
  int64_t parts = detail::norm_bwd_blocks(rows);
  const int64_t resident = int64_t(detail::sm_count()) * per_sm;
  parts = parts < resident ? parts : resident;
  // As few blocks as give the same rows per block: no straggler block, fewer partials.
  const int64_t per_block = (rows + parts - 1) / parts;
  parts = (rows + per_block - 1) / per_block;
  kernel<<<static_cast<unsigned>(parts), t, smem, stream>>>(x, gamma, dy, dx, partial, rows, cols,
                                                             eps, stages);
  PERFSIM_CUDA_CHECK_LAUNCH();
  return parts;
}

template <class T, bool Layer>
int64_t launch_packs(const T* x, const T* gamma, const T* dy, T* dx, float* partial, int64_t rows,
                     int64_t cols, float eps, int per_sm, int per_step, int packs, cudaStream_t stream) {
  // RMSNorm: one pack per thread when the row fits in k_max_threads, twice the warps per SM
  // to hide each row's reduction latency (bf16 4096: 90% of a copy, 83% with two packs).
  // LayerNorm: two packs (77%; 64% with one: its four statistics per row and gamma, dgamma and
  // dbeta in registers leave too few registers at 512 threads × 2 blocks per SM).
  if (packs == 0)
    packs = !Layer && detail::reg_row_threads(cols / detail::vec_of<T>, 1, k_max_threads) > 0 ? 1 : 2;
  if (packs == 1)
    return per_step == 1 ? launch<T, 1, 1, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, stream)
                         : launch<T, 1, 2, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, stream);
  return per_step == 1 ? launch<T, 2, 1, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, stream)
                       : launch<T, 2, 2, Layer>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, stream);
}

}  // namespace

template <class T>
int64_t detail::norm_bwd_pipelined(bool layer, const T* x, const T* gamma, const T* dy, T* dx,
                                   float* partial, int64_t rows, int64_t cols, float eps,
                                   cudaStream_t stream, int blocks_per_sm, int rows_per_step,
                                   int packs) {
  if (cols % vec_of<T> != 0 || !aligned(16, x, gamma, dy, dx)) return 0;
  const int per_sm = blocks_per_sm > 0 ? blocks_per_sm : k_blocks_per_sm;
  const int per_step = rows_per_step > 0 ? rows_per_step : k_rows_per_step;
  return layer ? launch_packs<T, true>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, per_step, packs, stream)
               : launch_packs<T, false>(x, gamma, dy, dx, partial, rows, cols, eps, per_sm, per_step, packs, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(T)                                           \
  template int64_t detail::norm_bwd_pipelined<T>(bool, const T*, const T*, const T*, T*, float*, \
                                                 int64_t, int64_t, float, cudaStream_t, int, int, int);
PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(float)
PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_NORM_BWD_PIPELINED(__half)

}  // namespace perfsim::cuda
