// StreamHold (see stream_hold.hpp).
#include "backends/cuda/stream_hold.hpp"

#include <cstdint>

#include "backends/cuda/cuda_check.hpp"

namespace perfsim::cuda {

namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// flags[0]: the ticket the host released last; flags[1]: written with `ticket` on a timeout.
__global__ void hold_kernel(volatile unsigned* flags, unsigned ticket, uint64_t timeout_ns) {
  const uint64_t start = global_ns();
  while (flags[0] != ticket) {
    if (global_ns() - start > timeout_ns) {
      flags[1] = ticket;
      return;
    }
    __nanosleep(200);
  }
}

}  // namespace

StreamHold::StreamHold() {
  PERFSIM_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m_flags), 2 * sizeof(unsigned), cudaHostAllocMapped));
  m_flags[0] = m_flags[1] = 0;
  PERFSIM_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m_device_flags), m_flags, 0));
}

StreamHold::~StreamHold() {
  if (m_flags != nullptr) (void)cudaFreeHost(m_flags);
}

void StreamHold::hold(cudaStream_t s, double timeout_seconds) {
  ++m_ticket;
  hold_kernel<<<1, 1, 0, s>>>(m_device_flags, m_ticket, static_cast<uint64_t>(timeout_seconds * 1e9));
  PERFSIM_CUDA_CHECK_LAUNCH();
}

void StreamHold::release() { __atomic_store_n(&m_flags[0], m_ticket, __ATOMIC_RELEASE); }

bool StreamHold::released() const { return __atomic_load_n(&m_flags[1], __ATOMIC_ACQUIRE) != m_ticket; }

}  // namespace perfsim::cuda
