#include "backends/cpu/shared_tensors.hpp"

#include <map>

namespace perfsim::cpu {

bool SharedTensors::shares(const Tensor& t) {
  return !t.on_host() && (t.role == TensorRole::weight || t.role == TensorRole::kv_cache);
}

void* SharedTensors::find(const Tensor& t) const {
  const auto it = m_held.find(t.name);
  if (it == m_held.end() || it->second.dtype != t.dtype || it->second.shape != t.shape) return nullptr;
  return it->second.data.get();
}

void* SharedTensors::add(const Tensor& t, std::size_t bytes) {
  Held& h = m_held[t.name];
  h.kv = t.role == TensorRole::kv_cache;
  h.dtype = t.dtype;
  h.shape = t.shape;
  h.bytes = bytes;
  h.data = std::make_unique<std::byte[]>(bytes);  // value-initialized: zeros
  return h.data.get();
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
      sorted[name] = {h.data.get(), h.shape.front(), h.bytes / static_cast<std::size_t>(h.shape.front())};
  std::vector<Pages> out;
  for (const auto& [name, p] : sorted) out.push_back(p);
  return out;
}

}  // namespace perfsim::cpu
