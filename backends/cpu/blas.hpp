// Every OpenBLAS product of the CPU backend goes through sgemm() here. OpenBLAS runs on the
// calling thread only and the backend's own pool (backends/common/parallel) splits a large
// product into column (or row) panels: one set of threads for all kernels. Left to itself,
// OpenBLAS keeps its own threads spinning for a while after each call, and on a machine with
// few cores they took half of it from the next kernel of the backend's pool (a bf16 GEMV timed
// right after an sgemm streamed at half the speed it reaches alone), so calibration and runs
// timed the same kernel at speeds that depended on what ran before it.
#pragma once
#include <cstdint>

namespace perfsim::cpu::blas {

// C[rows, cols] (ldc) = alpha · op(A)·op(B) + beta · C, row-major; op(X) = X^T when its flag
// is set. Runs on the pool when the product is large enough to share, inline otherwise (and
// inline when called from inside a pool chunk).
void sgemm(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace perfsim::cpu::blas
