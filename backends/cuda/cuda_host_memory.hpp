// Host memory for the graph's host tensors (Residence::host_pageable / host_pinned): plain
// page-aligned allocations for pageable tensors, cudaHostAlloc for pinned ones. Host tensors
// are not device memory, so none of this goes through the caching allocator or its tracked
// peak; every block lives until the owner is destroyed.
#pragma once
#include <cstddef>
#include <vector>

namespace perfsim::cuda {

class HostMemory {
 public:
  HostMemory() = default;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory();

  // `bytes` (at least 1) of host memory, page-locked when pinned. Throws NotExecutable when
  // the host cannot provide it.
  [[nodiscard]] void* allocate(std::size_t bytes, bool pinned);
  // Frees every block (cudaFreeHost for pinned ones).
  void release_all();

  [[nodiscard]] std::size_t bytes(bool pinned) const { return pinned ? m_pinned_bytes : m_pageable_bytes; }

 private:
  struct Block {
    void* ptr = nullptr;
    bool pinned = false;
  };
  std::vector<Block> m_blocks;
  std::size_t m_pinned_bytes = 0, m_pageable_bytes = 0;
};

}  // namespace perfsim::cuda
