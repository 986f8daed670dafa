// BlasHandle (see cuda_blas.hpp).
#include "backends/cuda/cuda_blas.hpp"

#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.hpp"

namespace perfsim::cuda {

BlasHandle::BlasHandle() {
  PERFSIM_CUBLAS_CHECK(cublasCreate(&m_handle));
  try {
    PERFSIM_CUDA_CHECK(cudaMalloc(&m_workspace, workspace_bytes));
  } catch (...) {
    (void)cublasDestroy(m_handle);
    throw;
  }
}

BlasHandle::~BlasHandle() {
  (void)cudaFree(m_workspace);
  (void)cublasDestroy(m_handle);
}

}  // namespace perfsim::cuda
