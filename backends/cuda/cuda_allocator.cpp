// CachingAllocator (see cuda_allocator.hpp): best-fit reuse of cached blocks, cudaMalloc
// only when no cached block fits, one trim-and-retry on out of memory.
#include "backends/cuda/cuda_allocator.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "backends/cuda/cuda_check.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

namespace {

constexpr std::size_t small_round = 512;            // cudaMalloc aligns to 256 B anyway
constexpr std::size_t large_round = 2u << 20;       // 2 MiB, the driver's large page
constexpr std::size_t large_threshold = 1u << 20;   // requests from 1 MiB are large
constexpr double gib = 1024.0 * 1024.0 * 1024.0;

}  // namespace

std::size_t CachingAllocator::round_size(std::size_t bytes) {
  const std::size_t r = bytes < large_threshold ? small_round : large_round;
  return (bytes + r - 1) / r * r;
}

CachingAllocator::~CachingAllocator() {
  // Never throw from a destructor: errors here are ignored (the context may be gone).
  for (auto& [p, live] : m_live) (void)cudaFree(p);
  for (auto& [cap, p] : m_cache) (void)cudaFree(p);
}

void* CachingAllocator::malloc_block(std::size_t capacity, std::size_t requested) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, capacity);
  if (e == cudaErrorMemoryAllocation && !m_cache_held && !m_cache.empty()) {
    (void)cudaGetLastError();
    trim();
    e = cudaMalloc(&p, capacity);
  }
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw NotExecutable(fmt::format(
        "does not fit: needs {:.2f} GiB, device has {:.2f} GiB ({:.2f} GiB free, {:.2f} GiB "
        "already held by this run{}); sample fewer layers or shrink the batch",
        (m_usage.current() + static_cast<double>(requested)) / gib, static_cast<double>(total_b) / gib,
        static_cast<double>(free_b) / gib, m_reserved / gib,
        m_cache_held ? ", its cached blocks kept for captured CUDA graphs" : ""));
  }
  PERFSIM_CUDA_CHECK(e);
  m_reserved += static_cast<double>(capacity);
  return p;
}

void* CachingAllocator::allocate(std::size_t bytes, TensorRole role) {
  if (bytes == 0) return nullptr;
  const std::size_t cap = round_size(bytes);
  void* p = nullptr;
  std::size_t got = cap;
  // Best fit among cached blocks, but never more than twice the request (a small tensor
  // must not pin a huge block another tensor will need).
  if (auto it = m_cache.lower_bound(cap); it != m_cache.end() && it->first <= 2 * cap) {
    got = it->first;
    p = it->second;
    m_cache_nodes.push_back(m_cache.extract(it));
  } else {
    p = malloc_block(cap, bytes);
  }
  if (m_live_nodes.empty()) {
    m_live[p] = Live{bytes, got, role};
  } else {
    auto node = std::move(m_live_nodes.back());
    m_live_nodes.pop_back();
    node.key() = p;
    node.mapped() = Live{bytes, got, role};
    m_live.insert(std::move(node));
  }
  m_usage.add(role, static_cast<double>(bytes));
  return p;
}

void CachingAllocator::release(void* p) {
  if (p == nullptr) return;
  const auto it = m_live.find(p);
  if (it == m_live.end()) throw std::logic_error("cuda allocator: release of a pointer it does not own");
  m_usage.remove(it->second.role, static_cast<double>(it->second.bytes));
  const std::size_t capacity = it->second.capacity;
  m_live_nodes.push_back(m_live.extract(it));
  if (m_cache_nodes.empty()) {
    m_cache.emplace(capacity, p);
  } else {
    auto node = std::move(m_cache_nodes.back());
    m_cache_nodes.pop_back();
    node.key() = capacity;
    node.mapped() = p;
    m_cache.insert(std::move(node));
  }
}

void CachingAllocator::trim() {
  if (m_cache_held) return;
  for (auto& [cap, p] : m_cache) {
    PERFSIM_CUDA_CHECK(cudaFree(p));
    m_reserved -= static_cast<double>(cap);
  }
  m_cache.clear();
}

}  // namespace perfsim::cuda
