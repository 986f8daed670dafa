#include "backends/cuda/cuda_check.hpp"

#include <cublas_api.h>
#include <fmt/format.h>

#ifdef PERFSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace perfsim::cuda {

namespace {

std::string device_text() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return "an unknown device";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return fmt::format("device {}", dev);
  return fmt::format("device {} ({})", dev, prop.name);
}

const char* cublas_status_text(int s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

}  // namespace

void throw_cuda_error(const char* library, const char* call, const std::string& what,
                      const char* file, int line) {
  throw CudaError(fmt::format("{} call {} failed on {}: {} at {}:{}", library, call, device_text(),
                              what, file, line));
}

void throw_cuda_status(cudaError_t e, const char* call, const char* file, int line) {
  throw_cuda_error("CUDA", call, fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e)),
                   file, line);
}

void throw_cublas_status(int status, const char* call, const char* file, int line) {
  throw_cuda_error("cuBLAS", call, fmt::format("{} ({})", cublas_status_text(status), status), file,
                   line);
}

void throw_nccl_status(int result, const char* call, const char* file, int line) {
#ifdef PERFSIM_HAVE_NCCL
  // NCCL's own account of the failure, when it kept one (the error string is only its class).
  const char* last = ncclGetLastError(nullptr);
  throw_cuda_error("NCCL", call,
                   fmt::format("{} ({}){}", ncclGetErrorString(static_cast<ncclResult_t>(result)), result,
                               last != nullptr && *last != 0 ? fmt::format(": {}", last) : ""),
                   file, line);
#else
  throw_cuda_error("NCCL", call, fmt::format("error {}", result), file, line);
#endif
}

}  // namespace perfsim::cuda
