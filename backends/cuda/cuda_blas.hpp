// A cuBLAS handle with its own device workspace, for the batched GEMMs of materialized
// attention (backends/cuda/kernels/attn_matmul.cu). The workspace is allocated once, up
// front, and handed to cuBLAS on every call (cublasSetStream resets it to cuBLAS's default
// pool), so calls made while a CUDA graph is captured never allocate.
#pragma once
#include <cublas_v2.h>

#include <cstddef>

namespace perfsim::cuda {

class BlasHandle {
 public:
  BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
  ~BlasHandle();

  // 32 MiB: cuBLAS's recommended workspace on Hopper.
  static constexpr std::size_t workspace_bytes = 32u << 20;

  [[nodiscard]] cublasHandle_t handle() const { return m_handle; }
  [[nodiscard]] void* workspace() const { return m_workspace; }  // [workspace_bytes]

 private:
  cublasHandle_t m_handle = nullptr;
  void* m_workspace = nullptr;
};

}  // namespace perfsim::cuda
