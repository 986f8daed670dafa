// The CPU backend: the correctness reference. Runs every op of a graph with the kernels in
// backends/cpu (OpenBLAS for GEMMs), allocating and freeing buffers on the memory model's
// schedule so the measured peak is comparable with the predicted one.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/run/backend.hpp"

namespace perfsim::cpu {

class CpuBackend final : public Backend {
 public:
  [[nodiscard]] std::string name() const override { return "cpu"; }
  [[nodiscard]] DeviceInfo device() const override;
  [[nodiscard]] std::string unsupported_reason(const Op& op, const Graph& g) const override;
  // Persistent tensors are allocated and filled first (backends/common/tensor_init.hpp), then the graph runs
  // o.warmup + o.repeats times; each op is timed on its own (steady_clock), activations are
  // allocated right before their writer and freed right after their last use (last_use).
  [[nodiscard]] Measurement run(const Graph& g, const RunOptions& o) override;

  // Runs the graph once, untimed, from the values run() would start from (same seed), and
  // returns the final values of the tensors in `ids`, widened to float, in that order. Kept
  // tensors outlive their last use, so the allocation schedule differs from run()'s. The
  // reference other backends and graph passes are checked against. `writes`: int32 inputs
  // overwritten before the run (metadata whose values must follow rules, as a serving step's).
  [[nodiscard]] std::vector<std::vector<float>> evaluate(const Graph& g, uint64_t seed, const std::vector<int>& ids,
                                                         const std::map<int, std::vector<int32_t>>& writes = {});

  // One rank of a parallel run: collectives go between the ranks (cpu_collectives.hpp) and
  // shards start from their part of the whole's values (backends/common/tensor_init.hpp).
  void join_ranks(Communicator* ranks) override { m_ranks = ranks; }

  // A serving engine on the host's cores (cpu_engine_session.cpp).
  [[nodiscard]] std::unique_ptr<EngineSession> open_engine(uint64_t seed) override;

 private:
  Communicator* m_ranks = nullptr;
};

}  // namespace perfsim::cpu
