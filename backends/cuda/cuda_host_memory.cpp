// HostMemory (see cuda_host_memory.hpp).
#include "backends/cuda/cuda_host_memory.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <new>

#include "core/errors.hpp"

namespace perfsim::cuda {

namespace {

// Page alignment, so a pageable block starts where a pinned one would (the driver's staging
// copies then move whole pages).
constexpr std::size_t page = 4096;

}  // namespace

HostMemory::~HostMemory() { release_all(); }

void* HostMemory::allocate(std::size_t bytes, bool pinned) {
  bytes = std::max<std::size_t>(bytes, 1);
  void* p = nullptr;
  if (pinned) {
    if (const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault); e != cudaSuccess) {
      (void)cudaGetLastError();
      throw NotExecutable(fmt::format("cuda backend: cannot pin {:.3f} GiB of host memory ({})",
                                      static_cast<double>(bytes) / double(1ull << 30), cudaGetErrorString(e)));
    }
    m_pinned_bytes += bytes;
  } else {
    p = ::operator new(bytes, std::align_val_t{page}, std::nothrow);
    if (p == nullptr)
      throw NotExecutable(fmt::format("cuda backend: cannot allocate {:.3f} GiB of host memory",
                                      static_cast<double>(bytes) / double(1ull << 30)));
    m_pageable_bytes += bytes;
  }
  m_blocks.push_back({p, pinned});
  return p;
}

void HostMemory::release_all() {
  for (const Block& b : m_blocks) {
    if (b.pinned) (void)cudaFreeHost(b.ptr);
    else ::operator delete(b.ptr, std::align_val_t{page});
  }
  m_blocks.clear();
  m_pinned_bytes = m_pageable_bytes = 0;
}

}  // namespace perfsim::cuda
