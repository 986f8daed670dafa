// The CPU backend's serving engine: weights and KV pages in SharedTensors, one GraphRunner per
// step (each step's graph has its own shapes), timed by the host's clock.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_graph_runner.hpp"
#include "backends/cpu/kv_transfer.hpp"
#include "backends/cpu/shared_tensors.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

class CpuEngineSession final : public EngineSession {
 public:
  CpuEngineSession(uint64_t seed, Communicator* ranks) : m_seed(seed), m_ranks(ranks) {}

  StepTimes run_step(const Graph& g, const StepInputs& inputs) override {
    using clock = std::chrono::steady_clock;
    GraphRunner runner(g, m_seed, ranks_for(g), &m_shared);
    const auto t0 = clock::now();
    for (const auto& [name, values] : inputs) runner.write(step_input_id(g, name, "cpu"), values);
    runner.run_once();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    return {s, s, {}};
  }

  StepTimes run_step_ops(const Graph& g, const StepInputs& inputs) override {
    using clock = std::chrono::steady_clock;
    GraphRunner runner(g, m_seed, ranks_for(g), &m_shared);
    const auto t0 = clock::now();
    for (const auto& [name, values] : inputs) runner.write(step_input_id(g, name, "cpu"), values);
    std::vector<std::vector<double>> per_op(g.ops.size());
    runner.run_once(&per_op);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    StepTimes t{s, s, {}};
    for (const auto& samples : per_op) t.ops.push_back(samples.empty() ? 0.0 : samples.back());
    return t;
  }

  double swap(double bytes, bool out) override {
    // Host to host on a CPU: the copy a swap makes, of real bytes.
    const auto n = static_cast<std::size_t>(bytes);
    if (m_swap.size() < n) m_swap.resize(n);
    if (m_pool_side.size() < n) m_pool_side.resize(n);
    const auto t0 = std::chrono::steady_clock::now();
    if (out) std::memcpy(m_swap.data(), m_pool_side.data(), n);
    else std::memcpy(m_pool_side.data(), m_swap.data(), n);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  [[nodiscard]] double held_bytes() const override { return m_shared.bytes(); }

  void send_pages(const std::vector<int64_t>& blocks, int peer) override {
    send_kv_pages(m_shared, blocks, joined(), peer);
  }
  void receive_pages(const std::vector<int64_t>& blocks, int peer) override {
    receive_kv_pages(m_shared, blocks, joined(), peer);
  }

 private:
  // A tensor-parallel engine's step (collectives in it) runs on the ranks, its weights each
  // rank's shard of the whole; a replica's step is its own rank's alone.
  [[nodiscard]] Communicator* ranks_for(const Graph& g) const {
    for (const Op& op : g.ops)
      if (op.kind == OpKind::collective) return m_ranks;
    return nullptr;
  }

  [[nodiscard]] Communicator& joined() const {
    if (m_ranks == nullptr) throw NotExecutable("cpu backend: KV pages move between ranks, and this engine runs alone");
    return *m_ranks;
  }

  uint64_t m_seed;
  Communicator* m_ranks = nullptr;
  SharedTensors m_shared;
  std::vector<std::byte> m_swap, m_pool_side;
};

}  // namespace

std::unique_ptr<EngineSession> CpuBackend::open_engine(uint64_t seed) {
  // Under ranks each rank serves an engine of its own (a replica) or its share of one engine's
  // steps (tensor parallelism).
  return std::make_unique<CpuEngineSession>(seed, m_ranks);
}

}  // namespace perfsim::cpu
