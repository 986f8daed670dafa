// The CUDA backend's caching allocator: cudaMalloc-backed blocks rounded up (512 B below
// 1 MiB, 2 MiB above), kept on free lists when released and reused by later requests of a
// fitting size, so repeated runs (and CUDA graph capture) do not call cudaMalloc again.
// Tracked figures follow the CPU TrackingAllocator (backends/cpu/buffer.hpp): current and
// peak bytes count the REQUESTED sizes of live buffers, so the peak describes the graph's
// schedule and compares with predict_memory(g, false); reserved bytes are what cudaMalloc
// holds (live + cached, rounded).
#pragma once
#include <cstddef>
#include <map>
#include <unordered_map>
#include <vector>

#include "backends/common/memory_usage.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cuda {

class CachingAllocator {
 public:
  explicit CachingAllocator(int device = 0) : m_device(device) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();

  // A device buffer of `bytes` (nullptr when bytes == 0), counted under `role` until
  // released. Out of memory: releases the cached blocks and retries once (not while the cache
  // is held), then throws NotExecutable("does not fit: needs X GiB, device has Y GiB").
  [[nodiscard]] void* allocate(std::size_t bytes, TensorRole role);
  // Returns a buffer from allocate() to the cache (no cudaFree); nullptr is ignored.
  void release(void* p);
  // cudaFree of every cached (released) block; nothing while the cache is held.
  void trim();
  // Held: cached blocks stay allocated whatever happens. CUDA graphs captured by runners
  // that are gone still address the blocks their activations had (now cached, reused by
  // later passes in stream order, which is safe); freeing them would leave those graphs
  // writing memory the device no longer gives them.
  void hold_cache(bool held) { m_cache_held = held; }
  [[nodiscard]] bool cache_held() const { return m_cache_held; }
  // Counts `bytes` of device memory held outside this allocator (a library's workspace
  // cudaMalloc'd by its handle) under `role`, as if allocated, until uncount_external():
  // the tracked figures then describe all the device memory a graph run holds.
  void count_external(std::size_t bytes, TensorRole role) { m_usage.add(role, static_cast<double>(bytes)); }
  void uncount_external(std::size_t bytes, TensorRole role) { m_usage.remove(role, static_cast<double>(bytes)); }

  // Block size a request is rounded to.
  [[nodiscard]] static std::size_t round_size(std::size_t bytes);

  [[nodiscard]] double current_bytes() const { return m_usage.current(); }
  [[nodiscard]] double peak_bytes() const { return m_usage.peak(); }
  [[nodiscard]] double reserved_bytes() const { return m_reserved; }
  // Bytes per role when the peak was reached (roles with no bytes are absent).
  [[nodiscard]] const std::map<TensorRole, double>& bytes_by_role_at_peak() const { return m_usage.at_peak(); }
  [[nodiscard]] double current_bytes(TensorRole r) const { return m_usage.current(r); }
  // Restarts peak tracking from the current state.
  void reset_peak() { m_usage.reset_peak(); }

 private:
  struct Live {
    std::size_t bytes = 0;     // requested
    std::size_t capacity = 0;  // rounded block size
    TensorRole role = TensorRole::activation;
  };
  void* malloc_block(std::size_t capacity, std::size_t requested);

  int m_device = 0;
  std::unordered_map<void*, Live> m_live;
  std::multimap<std::size_t, void*> m_cache;  // capacity -> released block
  // Map nodes taken out of m_live and m_cache, reused so that a steady-state allocate/release
  // pair touches no heap: the eager dispatch path does one per op output.
  std::vector<std::unordered_map<void*, Live>::node_type> m_live_nodes;
  std::vector<std::multimap<std::size_t, void*>::node_type> m_cache_nodes;
  MemoryUsage m_usage;
  double m_reserved = 0;
  bool m_cache_held = false;
};

}  // namespace perfsim::cuda
