// Persistent tensors that several graphs share by name: a serving engine's weights and KV
// pages, which live across its steps while every step is a graph of its own. The first graph
// that names one allocates it (and its runner fills it: weights as backends/common/tensor_init.hpp says, KV
// pages zeroed); later graphs find it as earlier steps left it. A tensor of the same name
// with another dtype or shape replaces it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph/graph.hpp"

namespace perfsim::cpu {

class SharedTensors {
 public:
  // Whether a graph's tensor lives here rather than in the runner: weights and KV caches.
  [[nodiscard]] static bool shares(const Tensor& t);
  // The buffer held for t (same name, dtype and shape), else nullptr.
  [[nodiscard]] void* find(const Tensor& t) const;
  // A new buffer for t of `bytes`, zeroed, replacing any of its name.
  void* add(const Tensor& t, std::size_t bytes);
  [[nodiscard]] double bytes() const;

  // The KV cache tensors held (every layer's K and V pages), in name order: each one's first
  // dimension its pool's blocks, a block `block_bytes` long.
  struct Pages {
    std::byte* data = nullptr;
    int64_t blocks = 0;
    std::size_t block_bytes = 0;
  };
  [[nodiscard]] std::vector<Pages> kv_pages() const;

 private:
  struct Held {
    bool kv = false;
    DType dtype = DType::fp32;
    std::vector<int64_t> shape;
    std::size_t bytes = 0;
    std::unique_ptr<std::byte[]> data;
  };
  std::unordered_map<std::string, Held> m_held;
};

}  // namespace perfsim::cpu
