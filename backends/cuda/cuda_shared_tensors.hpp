// Persistent device tensors several graphs share by name: a serving engine's weights and KV
// pages, which live across its steps while every step is a graph of its own (the CPU
// backend's cpu::SharedTensors, on the GPU). Held in memory of their own (cudaMalloc, not the
// caching allocator, whose out-of-memory retry frees what it caches): the first graph that
// names one allocates it and its runner fills it (weights as any graph's, KV pages zeroed);
// later graphs find it as earlier steps left it. A tensor of the same name with another dtype
// or shape replaces it (the old one freed first). fp8 tensors keep their dequantization scale.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph/graph.hpp"

namespace perfsim::cuda {

class SharedTensors {
 public:
  SharedTensors() = default;
  SharedTensors(const SharedTensors&) = delete;
  SharedTensors& operator=(const SharedTensors&) = delete;
  ~SharedTensors();

  // Whether a graph's tensor lives here rather than in the runner: weights and KV caches.
  [[nodiscard]] static bool shares(const Tensor& t);
  struct Slot {
    void* data = nullptr;
    float* scale = nullptr;  // fp8 tensors: their dequantization scale (device)
  };
  // The buffers held for t (same name, dtype and shape), else {nullptr, nullptr}.
  [[nodiscard]] Slot find(const Tensor& t) const;
  // New buffers for t (`bytes`, zeroed; a scale slot when `fp8`), replacing any of its name.
  // Throws NotExecutable when the device cannot hold it.
  Slot add(const Tensor& t, std::size_t bytes, bool fp8);
  [[nodiscard]] double bytes() const;

  // The KV cache tensors held (every layer's K and V pages), in name order: each one's first
  // dimension its pool's blocks, a block `block_bytes` long (an fp8 cache's scale stays).
  struct Pages {
    void* data = nullptr;
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
    Slot slot;
  };
  static void free(Held& h);
  std::unordered_map<std::string, Held> m_held;
};

}  // namespace perfsim::cuda
