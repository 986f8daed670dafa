// Row normalizations on the GPU, mirroring cpu::layernorm/rmsnorm (backends/cpu/cpu_kernels.hpp):
// x, y, dx, sum [rows, cols]; gamma, beta, dgamma, dbeta [cols]. One block per row, 16-byte
// vector loads when the row pointers allow, fp32 statistics. The backward passes reduce
// dgamma/dbeta deterministically: each of at most min(rows, 512) blocks (as many as are
// resident on the device) owns a fixed range of rows and writes per-column partial sums to
// `workspace` (LayerNorm: pairs of blocks in a thread-block cluster first add theirs through
// distributed shared memory), then a second kernel sums the partials in a fixed order. Launchers are
// asynchronous on `stream` and capturable.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace perfsim::cuda {

// Floats of workspace rmsnorm_bwd / layernorm_bwd need for a [rows, cols] input.
[[nodiscard]] int64_t norm_bwd_workspace_floats(int64_t rows, int64_t cols);

template <class T> void rmsnorm(const T* x, const T* gamma, T* y, int64_t rows, int64_t cols,
                                float eps, cudaStream_t stream);
// dgamma overwritten with Σ_rows dy ⊙ x̂.
template <class T> void rmsnorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma,
                                    int64_t rows, int64_t cols, float eps, float* workspace,
                                    cudaStream_t stream);
template <class T> void layernorm(const T* x, const T* gamma, const T* beta, T* y, int64_t rows,
                                  int64_t cols, float eps, cudaStream_t stream);
// dgamma, dbeta overwritten (summed over rows); statistics recomputed from x.
template <class T> void layernorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma,
                                      T* dbeta, int64_t rows, int64_t cols, float eps,
                                      float* workspace, cudaStream_t stream);
// sum = a + b (stored, then normalized as stored) and y = norm(sum) in one pass.
template <class T> void add_rmsnorm(const T* a, const T* b, const T* gamma, T* sum, T* y,
                                    int64_t rows, int64_t cols, float eps, cudaStream_t stream);
template <class T> void add_layernorm(const T* a, const T* b, const T* gamma, const T* beta,
                                      T* sum, T* y, int64_t rows, int64_t cols, float eps,
                                      cudaStream_t stream);

namespace detail {
// Blocks (= partial rows in the workspace) a norm backward uses for `rows` rows.
[[nodiscard]] int64_t norm_bwd_blocks(int64_t rows);
// out[c] = Σ_p partial[p·cols + c] over `parts` partials, in order p = 0, 1, ...; and, when
// `second` is given, second[c] the same sum of the next `parts` partial rows (one launch).
// Launched with programmatic stream serialization: its launch overlaps the end of the kernel
// before it, whose results it waits for.
template <class T> void sum_partials(const float* partial, T* out, int64_t parts, int64_t cols,
                                     cudaStream_t stream, T* second = nullptr);
// The pipelined backward (norm_bwd_pipelined.cu) of LayerNorm (`layer`) or RMSNorm: writes dx
// and the partial rows (dgamma [0, P), dbeta [P, 2P)) and returns P, or returns 0 without
// launching when the rows are unaligned or too wide for it (the caller falls back).
// blocks_per_sm (resident blocks per SM at most), rows_per_step (1 or 2 rows per block
// reduction), packs (16-byte packs per thread, 1 or 2) and cluster (blocks per thread-block
// cluster that add their partials in distributed shared memory before writing them: 1, 2 or
// 4; P counts clusters): 0 = the defaults; other values are for the benchmark's sweep.
// P ≤ norm_bwd_blocks(rows) always (the workspace size does not depend on these settings).
template <class T> [[nodiscard]] int64_t norm_bwd_pipelined(bool layer, const T* x, const T* gamma,
                                                            const T* dy, T* dx, float* partial,
                                                            int64_t rows, int64_t cols, float eps,
                                                            cudaStream_t stream,
                                                            int blocks_per_sm = 0,
                                                            int rows_per_step = 0, int packs = 0,
                                                            int cluster = 0);
}  // namespace detail

}  // namespace perfsim::cuda
