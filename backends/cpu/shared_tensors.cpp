#include "backends/cpu/shared_tensors.hpp"

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

}  // namespace perfsim::cpu
