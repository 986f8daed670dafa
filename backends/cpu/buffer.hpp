// The CPU backend's tracking allocator: 64-byte aligned buffers whose sizes are exactly
// elements × bytes per element, with current and peak bytes and the bytes of each tensor
// role at the peak. Freed blocks are kept for reuse by a later request of the same size,
// so repeated runs do not grow memory or fault pages in again; the tracked figures count
// only live buffers, so the peak describes the graph's schedule, not the cache.
#pragma once
#include <cstddef>
#include <map>
#include <unordered_map>
#include <vector>

#include "backends/common/memory_usage.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cpu {

class TrackingAllocator {
 public:
  TrackingAllocator() = default;
  TrackingAllocator(const TrackingAllocator&) = delete;
  TrackingAllocator& operator=(const TrackingAllocator&) = delete;
  ~TrackingAllocator();

  // A buffer of `bytes` (nullptr when bytes == 0), counted under `role` until released.
  // Throws NotExecutable when the system cannot provide it.
  [[nodiscard]] void* allocate(std::size_t bytes, TensorRole role);
  // Returns a buffer from allocate(); nullptr is ignored.
  void release(void* p);
  // Gives cached (released) blocks back to the system.
  void trim();

  [[nodiscard]] double current_bytes() const { return m_usage.current(); }
  [[nodiscard]] double peak_bytes() const { return m_usage.peak(); }
  // Bytes per role when the peak was reached (roles with no bytes are absent).
  [[nodiscard]] const std::map<TensorRole, double>& bytes_by_role_at_peak() const { return m_usage.at_peak(); }
  [[nodiscard]] double current_bytes(TensorRole r) const { return m_usage.current(r); }
  // Restarts peak tracking from the current state.
  void reset_peak() { m_usage.reset_peak(); }

 private:
  struct Live {
    std::size_t bytes = 0;     // requested
    std::size_t capacity = 0;  // rounded to the alignment
    TensorRole role = TensorRole::activation;
  };
  std::unordered_map<void*, Live> m_live;
  std::multimap<std::size_t, void*> m_cache;  // capacity -> released block
  MemoryUsage m_usage;
};

}  // namespace perfsim::cpu
