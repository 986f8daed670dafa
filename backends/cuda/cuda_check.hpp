// One checking macro family for CUDA runtime, cuBLAS(Lt) and NCCL return codes. A failure
// throws CudaError naming the call, the device and file:line, so the CLI can print one line.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace perfsim::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "cudaMalloc(&p, n) failed on device 0 (NVIDIA H100 80GB HBM3): out of memory at
// backends/cuda/cuda_allocator.cpp:42"
[[noreturn]] void throw_cuda_error(const char* library, const char* call, const std::string& what,
                                   const char* file, int line);
[[noreturn]] void throw_cuda_status(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_status(int status, const char* call, const char* file, int line);
[[noreturn]] void throw_nccl_status(int result, const char* call, const char* file, int line);

}  // namespace perfsim::cuda

#define PERFSIM_CUDA_CHECK(call)                                                          \
  do {                                                                                    \
    const cudaError_t perfsim_e_ = (call);                                                \
    if (perfsim_e_ != cudaSuccess)                                                        \
      ::perfsim::cuda::throw_cuda_status(perfsim_e_, #call, __FILE__, __LINE__);          \
  } while (0)

#define PERFSIM_CUBLAS_CHECK(call)                                                        \
  do {                                                                                    \
    const int perfsim_s_ = static_cast<int>(call);                                        \
    if (perfsim_s_ != 0) ::perfsim::cuda::throw_cublas_status(perfsim_s_, #call, __FILE__, __LINE__); \
  } while (0)

#define PERFSIM_NCCL_CHECK(call)                                                          \
  do {                                                                                    \
    const int perfsim_r_ = static_cast<int>(call);                                        \
    if (perfsim_r_ != 0) ::perfsim::cuda::throw_nccl_status(perfsim_r_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define PERFSIM_CUDA_CHECK_LAUNCH() PERFSIM_CUDA_CHECK(cudaGetLastError())
