// Tracking allocator: see buffer.hpp.
#include "backends/cpu/buffer.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {
constexpr std::size_t alignment = 64;  // a cache line; also enough for any SIMD load
}

TrackingAllocator::~TrackingAllocator() {
  for (auto& [p, live] : m_live) std::free(p);
  trim();
}

void* TrackingAllocator::allocate(std::size_t bytes, TensorRole role) {
  if (bytes == 0) return nullptr;
  const std::size_t capacity = (bytes + alignment - 1) / alignment * alignment;
  void* p = nullptr;
  if (auto it = m_cache.find(capacity); it != m_cache.end()) {
    p = it->second;
    m_cache.erase(it);
  } else {
    p = std::aligned_alloc(alignment, capacity);
    if (p == nullptr) {
      trim();  // cached blocks of other sizes may be what stands in the way
      p = std::aligned_alloc(alignment, capacity);
    }
    if (p == nullptr)
      throw NotExecutable(fmt::format("cpu backend: out of host memory allocating {:.1f} MiB "
                                      "({:.1f} MiB live); reduce the batch or sequence length",
                                      static_cast<double>(bytes) / (1 << 20), m_usage.current() / (1 << 20)));
  }
  m_live.emplace(p, Live{bytes, capacity, role});
  m_usage.add(role, static_cast<double>(bytes));
  return p;
}

void TrackingAllocator::release(void* p) {
  if (p == nullptr) return;
  auto it = m_live.find(p);
  if (it == m_live.end()) throw std::logic_error("cpu allocator: release of an unknown buffer");
  m_usage.remove(it->second.role, static_cast<double>(it->second.bytes));
  m_cache.emplace(it->second.capacity, p);
  m_live.erase(it);
}

void TrackingAllocator::trim() {
  for (auto& [cap, p] : m_cache) std::free(p);
  m_cache.clear();
}

}  // namespace perfsim::cpu
