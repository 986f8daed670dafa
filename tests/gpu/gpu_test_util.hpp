// Helpers for the GPU tests: device buffers that free themselves, host <-> device copies,
// output poisoning (NaN bytes, so an element a kernel forgets to write fails the
// comparison), and the CPU tests' random inputs and normalized error (cpu_test_util.hpp):
// max|got − want| / max|want|, bounded by 1e-5 for fp32 and 1e-2 for bf16/fp16.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "cpu_test_util.hpp"

namespace perfsim::cuda::test {

using cpu::test::random_ids;
using cpu::test::random_vec;
using cpu::test::rel_err;
using cpu::test::rounded;
using cpu::test::to_floats;
using cpu::test::to_storage;

// A device allocation of `bytes`, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : m_bytes(bytes) {
    if (bytes > 0) PERFSIM_CUDA_CHECK(cudaMalloc(&m_ptr, bytes));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : m_ptr(o.m_ptr), m_bytes(o.m_bytes) { o.m_ptr = nullptr, o.m_bytes = 0; }
  ~DeviceBuffer() {
    if (m_ptr != nullptr) (void)cudaFree(m_ptr);
  }
  [[nodiscard]] void* get() const { return m_ptr; }
  template <class T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(m_ptr);
  }
  [[nodiscard]] std::size_t bytes() const { return m_bytes; }

 private:
  void* m_ptr = nullptr;
  std::size_t m_bytes = 0;
};

template <class T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer d(host.size() * sizeof(T));
  if (!host.empty()) PERFSIM_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

// A device buffer of n elements of T filled with 0xFF bytes (NaN for every float type).
template <class T>
DeviceBuffer poisoned(std::size_t n) {
  DeviceBuffer d(n * sizeof(T));
  if (n > 0) PERFSIM_CUDA_CHECK(cudaMemset(d.get(), 0xFF, d.bytes()));
  return d;
}

// Copies n elements back (synchronizing the device first, so kernel faults surface here).
template <class T>
std::vector<T> from_device(const DeviceBuffer& d, std::size_t n) {
  PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> host(n);
  if (n > 0) PERFSIM_CUDA_CHECK(cudaMemcpy(host.data(), d.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace perfsim::cuda::test
