// GemmEngine::int8_gemm (see cuda_gemm.hpp): W8A8's int8 × int8 → int32 product on cuBLASLt's
// tensor-core kernels. Row-major c [m, n] is cuBLASLt's column-major n × m: its A is the weight
// w [n, k] (column-major k × n, transposed), its B the activations a [m, k] (column-major k × m).
#include <fmt/format.h>

#include <array>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

std::string GemmEngine::int8_unsupported(int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0) return fmt::format("cuda int8 gemm needs positive sizes (m {}, n {}, k {})", m, n, k);
  // Leading dimensions of whole 4-byte words: the int8 kernels' alignment.
  if (k % 4 != 0 || n % 4 != 0)
    return fmt::format("cuBLASLt int8 gemm needs k and n to be multiples of 4 (k = {}, n = {})", k, n);
  return {};
}

void GemmEngine::int8_gemm(const int8_t* a, const int8_t* w_nk, int32_t* c, int64_t m, int64_t n, int64_t k,
                           cudaStream_t stream) {
  if (const std::string why = int8_unsupported(m, n, k); !why.empty()) throw NotExecutable(why);
  const auto key = std::make_tuple(m, n, k);
  auto it = m_int8_plans.find(key);
  if (it == m_int8_plans.end()) {
    Plan p;
    PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
    const cublasOperation_t t = CUBLAS_OP_T, none = CUBLAS_OP_N;
    PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)));
    PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8I, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
    PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8I, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
    PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32I, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
    cublasLtMatmulPreference_t pref = nullptr;
    PERFSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = workspace_bytes;
    PERFSIM_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(m_handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    (void)cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
      destroy(p);
      throw NotExecutable(fmt::format("cuBLASLt has no int8 algorithm for m {} n {} k {} (status {})", m, n, k,
                                      static_cast<int>(st)));
    }
    p.algo = result.algo;
    it = m_int8_plans.emplace(key, p).first;
  }
  const Plan& p = it->second;
  const int32_t alpha = 1, beta = 0;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmul(m_handle, p.desc, &alpha, w_nk, p.a, a, p.b, &beta, c, p.c, c, p.c, &p.algo,
                                      m_workspace, workspace_bytes, stream));
}

}  // namespace perfsim::cuda
