#include "backends/cuda/cuda_shared_tensors.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <map>

#include "backends/cuda/cuda_check.hpp"
#include "core/errors.hpp"
#include "core/units.hpp"

namespace perfsim::cuda {

SharedTensors::~SharedTensors() {
  for (auto& [name, h] : m_held) free(h);
}

bool SharedTensors::shares(const Tensor& t) {
  return !t.on_host() && (t.role == TensorRole::weight || t.role == TensorRole::kv_cache);
}

SharedTensors::Slot SharedTensors::find(const Tensor& t) const {
  const auto it = m_held.find(t.name);
  if (it == m_held.end() || it->second.dtype != t.dtype || it->second.shape != t.shape) return {};
  return it->second.slot;
}

void SharedTensors::free(Held& h) {
  if (h.slot.data != nullptr) (void)cudaFree(h.slot.data);
  if (h.slot.scale != nullptr) (void)cudaFree(h.slot.scale);
  h.slot = {};
}

SharedTensors::Slot SharedTensors::add(const Tensor& t, std::size_t bytes, bool fp8) {
  if (auto it = m_held.find(t.name); it != m_held.end()) {
    free(it->second);
    m_held.erase(it);
  }
  Held h;
  h.kv = t.role == TensorRole::kv_cache;
  h.dtype = t.dtype;
  h.shape = t.shape;
  h.bytes = bytes;
  if (bytes > 0 && cudaMalloc(&h.slot.data, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    throw NotExecutable(fmt::format("cuda backend: no room for '{}' ({}) beside the {} the engine holds", t.name,
                                    format_bytes(static_cast<double>(bytes)), format_bytes(this->bytes())));
  }
  if (bytes > 0) PERFSIM_CUDA_CHECK(cudaMemset(h.slot.data, 0, bytes));
  if (fp8) {
    // 256 bytes: cuBLASLt wants aligned scale pointers (as the runner's own scale slots).
    PERFSIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&h.slot.scale), 256));
    const float one = 1.0f;
    PERFSIM_CUDA_CHECK(cudaMemcpy(h.slot.scale, &one, sizeof(float), cudaMemcpyHostToDevice));
  }
  return m_held.emplace(t.name, std::move(h)).first->second.slot;
}

double SharedTensors::bytes() const {
  double b = 0;
  for (const auto& [name, h] : m_held) b += static_cast<double>(h.bytes);
  return b;
}

std::vector<SharedTensors::Pages> SharedTensors::kv_pages() const {
  std::map<std::string, Pages> sorted;
  for (const auto& [name, h] : m_held)
    if (h.kv && !h.shape.empty() && h.shape.front() > 0)
      sorted[name] = {h.slot.data, h.shape.front(), h.bytes / static_cast<std::size_t>(h.shape.front())};
  std::vector<Pages> out;
  for (const auto& [name, p] : sorted) out.push_back(p);
  return out;
}

}  // namespace perfsim::cuda
