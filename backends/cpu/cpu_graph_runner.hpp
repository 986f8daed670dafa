// Executes a graph on the CPU kernels with the memory model's allocation schedule:
// persistent tensors allocated and filled once, each activation allocated right before the
// op that writes it and released right after its last use (core/cost/memory_model.hpp last_use).
// Host tensors live in plain host buffers outside the tracked allocator: like the memory
// model, the measured peak counts device memory only. The CPU has one queue, so ops of every
// stream run in program order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/buffer.hpp"
#include "backends/cpu/shared_tensors.hpp"
#include "core/graph/graph.hpp"
#include "core/run/communicator.hpp"

namespace perfsim::cpu {

class GraphRunner {
 public:
  // Checks the graph and every op's shapes, allocates persistent tensors and fills them
  // (backends/common/tensor_init.hpp). Throws NotExecutable for ops the CPU kernels cannot run.
  // With `ranks`, the graph is one rank's of a parallel run: shards start from the rank's part
  // of their whole and collective ops go between the ranks.
  // With `shared`, weights and KV caches come from it (shared_tensors.hpp): those it lacks are
  // added and filled (KV caches zeroed), those it holds keep their values.
  GraphRunner(const Graph& g, uint64_t seed, Communicator* ranks = nullptr, SharedTensors* shared = nullptr);

  // One pass over the ops. When op_seconds is given, op i's kernel time is appended to
  // (*op_seconds)[i], and its start and end (seconds from the pass's start) are appended to
  // starts and ends when those are given. Tensors with keep[id] set survive their last use (for
  // reading back).
  void run_once(std::vector<std::vector<double>>* op_seconds = nullptr,
                const std::vector<char>* keep = nullptr, std::vector<double>* starts = nullptr,
                std::vector<double>* ends = nullptr);

  // Values of a live tensor widened to float (token ids converted exactly; an fp8 KV cache's
  // stored values times its scale).
  [[nodiscard]] std::vector<float> read(int id) const;
  // Overwrites persistent int32 tensor `id` with `values` (as many as it holds).
  void write(int id, const std::vector<int32_t>& values);

  [[nodiscard]] const TrackingAllocator& allocator() const { return m_alloc; }

 private:
  const Graph& m_graph;
  Communicator* m_ranks = nullptr;
  TrackingAllocator m_alloc;
  std::vector<void*> m_buffers;          // by tensor id; nullptr when not live
  std::vector<std::unique_ptr<std::byte[]>> m_host;  // host tensors' buffers (untracked)
  std::vector<std::vector<int>> m_frees; // by op index: activations released after it
};

}  // namespace perfsim::cpu
