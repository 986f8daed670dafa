// The CUDA backend's serving engine: weights and KV pages in SharedTensors (allocated once,
// kept across steps), one GraphRunner per step without per-op events, each step one eager
// pass (run_walled) timed by events on the stream, or a replay of the CUDA graph captured for
// its padded batch size (kept with its runner for the session; a tensor-parallel step's NCCL
// all-reduces captured inside it); swaps copy between the page
// pool and pinned host memory. While graphs are captured the allocator keeps its cached
// blocks (CachingAllocator::hold_cache): their activations live there between replays.
// GEMMs keep cuBLASLt's first heuristic algorithm while a session is open, as a serving
// engine's library calls do: every new token count is a new GEMM shape, and autotuning it
// (cuda_gemm.hpp) would time eight candidates inside the step that met it.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/cuda_host_memory.hpp"
#include "backends/cuda/cuda_shared_tensors.hpp"
#include "backends/cuda/kernels/kv_pages.cuh"
#include "backends/cuda/stream_wait.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

namespace {

class CudaEngineSession final : public EngineSession {
 public:
  CudaEngineSession(uint64_t seed, CachingAllocator& alloc, GemmEngine& gemm, cudaStream_t stream, NcclRanks* ranks)
      : m_seed(seed), m_alloc(alloc), m_gemm(gemm), m_stream(stream), m_ranks(ranks),
        m_autotune_before(gemm.autotune()) {
    m_gemm.set_autotune(false);
    PERFSIM_CUDA_CHECK(cudaEventCreate(&m_swap_start));
    PERFSIM_CUDA_CHECK(cudaEventCreate(&m_swap_end));
  }
  ~CudaEngineSession() override {
    (void)cudaStreamSynchronize(m_stream);
    (void)cudaEventDestroy(m_swap_start);
    (void)cudaEventDestroy(m_swap_end);
    if (m_swap_device != nullptr) (void)cudaFree(m_swap_device);
    if (m_message != nullptr) (void)cudaFree(m_message);
    if (m_table != nullptr) (void)cudaFree(m_table);
    m_gemm.set_autotune(m_autotune_before);
    m_alloc.hold_cache(false);  // the captured graphs go with the session
  }
  CudaEngineSession(const CudaEngineSession&) = delete;
  CudaEngineSession& operator=(const CudaEngineSession&) = delete;

  StepTimes run_step(const Graph& g, const StepInputs& inputs) override {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    GraphRunner runner(g, m_seed, m_alloc, m_gemm, m_stream, ranks_for(g), &m_shared, false);
    for (const auto& [name, values] : inputs) runner.write(step_input_id(g, name, "cuda"), values);
    StepTimes t;
    t.device = runner.run_walled();  // synchronizes
    t.wall = std::chrono::duration<double>(clock::now() - t0).count();
    return t;
  }

  StepTimes run_step_ops(const Graph& g, const StepInputs& inputs) override {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    GraphRunner runner(g, m_seed, m_alloc, m_gemm, m_stream, ranks_for(g), &m_shared, true);
    for (const auto& [name, values] : inputs) runner.write(step_input_id(g, name, "cuda"), values);
    std::vector<std::vector<double>> per_op(g.ops.size());
    StepTimes t;
    // The stream held until every op is issued, so an op's events time the device's work, not
    // the host's pace of issuing it; a hold that timed out (the host blocked while issuing)
    // leaves no times, and the step runs again unheld.
    if (const std::optional<double> held = runner.run_held(&per_op)) {
      t.device = *held;
    } else {
      for (auto& samples : per_op) samples.clear();
      t.device = runner.run_once(&per_op);  // synchronizes
    }
    t.wall = std::chrono::duration<double>(clock::now() - t0).count();
    for (const auto& samples : per_op) t.ops.push_back(samples.empty() ? 0.0 : samples.back());
    return t;
  }

  StepTimes run_graphed(int64_t key, const std::function<Graph()>& build, const StepInputs& inputs,
                        double& capture_seconds) override {
    using clock = std::chrono::steady_clock;
    capture_seconds = 0;
    auto it = m_captured.find(key);
    if (it == m_captured.end()) {
      // First met: run the step eagerly from its own graph (that is the step), then capture it.
      Captured c;
      c.graph = std::make_unique<Graph>(build());
      const auto t0 = clock::now();
      // A tensor-parallel step's all-reduces are captured with it: every rank replays its graph
      // of the key together (follow_engine), NCCL meeting inside the graphs.
      c.runner = std::make_unique<GraphRunner>(*c.graph, m_seed, m_alloc, m_gemm, m_stream, ranks_for(*c.graph),
                                               &m_shared, false);
      for (const auto& [name, values] : inputs) c.runner->write(step_input_id(*c.graph, name, "cuda"), values);
      StepTimes t;
      t.device = c.runner->run_walled();
      t.wall = std::chrono::duration<double>(clock::now() - t0).count();
      const auto c0 = clock::now();
      c.runner->capture();
      capture_seconds = std::chrono::duration<double>(clock::now() - c0).count();
      // The graph addresses the activations its capture walk had, now back in the cache.
      m_alloc.hold_cache(true);
      m_captured.emplace(key, std::move(c));
      return t;
    }
    const auto t0 = clock::now();
    const Captured& c = it->second;
    for (const auto& [name, values] : inputs) c.runner->write(step_input_id(*c.graph, name, "cuda"), values);
    StepTimes t;
    t.device = c.runner->replay(1).front();  // synchronizes
    t.wall = std::chrono::duration<double>(clock::now() - t0).count();
    return t;
  }

  void forget_graphs() override {
    PERFSIM_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    m_captured.clear();
    m_alloc.hold_cache(false);
  }

  double swap(double bytes, bool out) override {
    const auto n = static_cast<std::size_t>(bytes);
    if (n == 0) return 0;
    if (n > m_swap_bytes) {
      // The blocks' bytes between device memory and pinned host memory, as vLLM's swap moves
      // them; the device side is a buffer of its own, the copy's cost being what matters.
      if (m_swap_device != nullptr) PERFSIM_CUDA_CHECK(cudaFree(m_swap_device));
      m_swap_device = nullptr;
      m_host.release_all();
      if (cudaMalloc(&m_swap_device, n) != cudaSuccess) {
        (void)cudaGetLastError();
        throw NotExecutable("cuda backend: no device memory left to swap KV blocks through");
      }
      m_swap_host = m_host.allocate(n, true);
      m_swap_bytes = n;
    }
    PERFSIM_CUDA_CHECK(cudaEventRecord(m_swap_start, m_stream));
    if (out) PERFSIM_CUDA_CHECK(cudaMemcpyAsync(m_swap_host, m_swap_device, n, cudaMemcpyDeviceToHost, m_stream));
    else PERFSIM_CUDA_CHECK(cudaMemcpyAsync(m_swap_device, m_swap_host, n, cudaMemcpyHostToDevice, m_stream));
    PERFSIM_CUDA_CHECK(cudaEventRecord(m_swap_end, m_stream));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(m_swap_end));
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, m_swap_start, m_swap_end));
    return ms * 1e-3;
  }

  [[nodiscard]] double held_bytes() const override { return m_shared.bytes(); }

  // The pages gathered into one device message, sent over NCCL, scattered on the other side.
  void send_pages(const std::vector<int64_t>& blocks, int peer) override { move_pages(blocks, peer, true); }
  void receive_pages(const std::vector<int64_t>& blocks, int peer) override { move_pages(blocks, peer, false); }

 private:
  // A tensor-parallel engine's step (collectives in it) runs on the ranks over NCCL, its weights
  // each rank's shard of the whole; a replica's step is its own GPU's alone.
  [[nodiscard]] NcclRanks* ranks_for(const Graph& g) const {
    for (const Op& op : g.ops)
      if (op.kind == OpKind::collective) return m_ranks;
    return nullptr;
  }

  void move_pages(const std::vector<int64_t>& blocks, int peer, bool send) {
    if (m_ranks == nullptr)
      throw NotExecutable("cuda backend: KV pages move between ranks, and this engine runs alone");
    const std::vector<SharedTensors::Pages> pages = m_shared.kv_pages();
    if (pages.empty()) throw NotExecutable("cuda backend: no KV pages to move yet");
    const std::size_t block_bytes = pages.front().block_bytes;
    std::vector<const void*> table;  // the tensors' addresses, then the block ids
    for (const SharedTensors::Pages& p : pages) {
      if (p.block_bytes != block_bytes)
        throw NotExecutable("cuda backend: KV page tensors of different block sizes cannot move as one message");
      for (int64_t b : blocks)
        if (b < 0 || b >= p.blocks)
          throw NotExecutable(fmt::format("cuda backend: KV block {} is outside the pool of {}", b, p.blocks));
      table.push_back(p.data);
    }
    const std::size_t message = pages.size() * blocks.size() * block_bytes;
    const std::size_t table_bytes = (pages.size() + blocks.size()) * sizeof(int64_t);
    grow(m_message, m_message_bytes, message);
    grow(m_table, m_table_bytes, table_bytes);
    std::vector<std::byte> host(table_bytes);
    std::memcpy(host.data(), table.data(), pages.size() * sizeof(void*));
    std::memcpy(host.data() + pages.size() * sizeof(void*), blocks.data(), blocks.size() * sizeof(int64_t));
    PERFSIM_CUDA_CHECK(cudaMemcpyAsync(m_table, host.data(), table_bytes, cudaMemcpyHostToDevice, m_stream));
    auto* const* tensors = static_cast<void* const*>(m_table);
    const auto* ids = reinterpret_cast<const int64_t*>(static_cast<const std::byte*>(m_table) +
                                                       pages.size() * sizeof(void*));
    const auto n = static_cast<int64_t>(blocks.size());
    const auto t = static_cast<int64_t>(pages.size());
    if (send) {
      gather_kv_pages(tensors, ids, t, n, block_bytes, m_message, m_stream);
      m_ranks->point_to_point(m_message, message, peer, true, m_stream, "KV pages sent");
    } else {
      m_ranks->point_to_point(m_message, message, peer, false, m_stream, "KV pages received");
      scatter_kv_pages(tensors, ids, t, n, block_bytes, m_message, m_stream);
    }
    wait_stream(m_stream, m_ranks);
  }

  // A device buffer of at least `bytes` (grown by reallocation; kept for the session).
  static void grow(void*& buffer, std::size_t& held, std::size_t bytes) {
    if (bytes <= held) return;
    if (buffer != nullptr) PERFSIM_CUDA_CHECK(cudaFree(buffer));
    buffer = nullptr;
    held = 0;
    if (cudaMalloc(&buffer, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      throw NotExecutable("cuda backend: no device memory left for the KV pages' message");
    }
    held = bytes;
  }

  struct Captured {
    std::unique_ptr<Graph> graph;  // the runner reads it: kept at a stable address
    std::unique_ptr<GraphRunner> runner;
  };

  uint64_t m_seed;
  CachingAllocator& m_alloc;
  GemmEngine& m_gemm;
  cudaStream_t m_stream;
  NcclRanks* m_ranks = nullptr;
  bool m_autotune_before;  // the GEMM engine's setting, given back when the session closes
  SharedTensors m_shared;
  std::map<int64_t, Captured> m_captured;  // by padded batch size; destroyed before m_shared
  HostMemory m_host;
  void* m_swap_host = nullptr;
  void* m_swap_device = nullptr;
  std::size_t m_swap_bytes = 0;
  cudaEvent_t m_swap_start = nullptr, m_swap_end = nullptr;
  void* m_message = nullptr;  // KV pages moving between ranks
  std::size_t m_message_bytes = 0;
  void* m_table = nullptr;    // their tensors' addresses and block ids, on the device
  std::size_t m_table_bytes = 0;
};

}  // namespace

std::unique_ptr<EngineSession> CudaBackend::open_engine(uint64_t seed) {
  // Under ranks each rank serves an engine of its own (a replica) or its share of one engine's
  // steps (tensor parallelism, its collectives over NCCL).
  return std::make_unique<CudaEngineSession>(seed, *m_alloc, *m_gemm, m_stream, m_ranks.get());
}

}  // namespace perfsim::cuda
