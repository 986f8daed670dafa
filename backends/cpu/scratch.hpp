// Transient buffers of one op on the CPU backend, counted as workspace by its allocator and
// released when the op's Scratch goes out of scope.
#pragma once
#include <cstddef>
#include <vector>

#include "backends/cpu/buffer.hpp"

namespace perfsim::cpu {

class Scratch {
 public:
  explicit Scratch(TrackingAllocator& a) : m_alloc(a) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (void* p : m_blocks) m_alloc.release(p);
  }
  [[nodiscard]] void* get(std::size_t bytes) {
    m_blocks.reserve(m_blocks.size() + 1);  // no allocation between taking the block and noting it
    void* p = m_alloc.allocate(bytes, TensorRole::workspace);
    m_blocks.push_back(p);
    return p;
  }

 private:
  TrackingAllocator& m_alloc;
  std::vector<void*> m_blocks;
};

}  // namespace perfsim::cpu
