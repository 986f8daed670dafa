// The CUDA backend: runs a graph on GPU 0 with cuBLASLt GEMMs and perfsim's own kernels
// (backends/cuda/kernels), the memory model's allocation schedule through a caching
// allocator, host tensors in pageable or pinned host memory (uploads and downloads are
// cudaMemcpyAsync), one CUDA stream per Op::stream with the fork/join events its contract
// asks for, per-op CUDA-event timing, and CUDA graph replay for graphs marked graphed.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_allocator.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "backends/cuda/nccl_ranks.hpp"
#include "core/run/backend.hpp"

namespace perfsim::cuda {

class GraphRunner;

class CudaBackend final : public Backend {
 public:
  CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  ~CudaBackend() override;

  [[nodiscard]] std::string name() const override { return "cuda"; }
  // query_device(0); when the hardware catalog has no entry for the GPU, the name says so.
  [[nodiscard]] DeviceInfo device() const override;
  [[nodiscard]] std::string unsupported_reason(const Op& op, const Graph& g) const override;
  // Eager: warm-up passes (at least o.warmup and at least 0.2 s of them, unless o.warmup is
  // 0), then o.repeats timed passes; each op timed by CUDA events on its stream, medians.
  // g.graphed: one eager pass, then the step captured twice into CUDA graphs, as it is and
  // with an event-record node around each op; after the same warm-up of replays, o.repeats
  // replays of each: per-op figures and step_time (stream timeline × count) from the timed
  // variant, executed_wall from the plain one (Measurement::graph_replayed).
  [[nodiscard]] Measurement run(const Graph& g, const RunOptions& o) override;

  // Runs the graph once from the values run() starts from (same seed) and returns the final
  // values of `ids` widened to float, as CpuBackend::evaluate does. g.graphed: the pass is a
  // replay of a captured CUDA graph (after an eager warm-up and a reset of the state).
  // `writes`: int32 inputs overwritten before the run.
  // Visible GPUs; time_collective() runs NCCL over the first `group` of them
  // (cuda_backend_collectives.cpp), with the nccl-tests timing loop of nccl_collectives.hpp.
  [[nodiscard]] int gpu_count() const override;
  [[nodiscard]] std::vector<double> time_collective(Collective c, int group,
                                                    const std::vector<double>& payload_bytes) override;

  [[nodiscard]] std::vector<std::vector<float>> evaluate(const Graph& g, uint64_t seed, const std::vector<int>& ids,
                                                         const std::map<int, std::vector<int32_t>>& writes = {});

  [[nodiscard]] const CachingAllocator& allocator() const { return *m_alloc; }

  // One rank of a parallel run: collectives go through NCCL between the GPU ranks
  // (nccl_ranks.hpp); each process sees one GPU (cli/ranks.cpp picks it by local rank).
  void join_ranks(Communicator* ranks) override;

  // A serving engine on this GPU (cuda_engine_session.cpp).
  [[nodiscard]] std::unique_ptr<EngineSession> open_engine(uint64_t seed) override;

 private:
  [[nodiscard]] Measurement run_eager(GraphRunner& runner, const Graph& g, const RunOptions& o);
  [[nodiscard]] Measurement run_replayed(GraphRunner& runner, const Graph& g, const RunOptions& o);
  // A replayed step timed op by op from CUPTI records; nullopt when they missed an op.
  [[nodiscard]] std::optional<Measurement> run_traced(GraphRunner& runner, const Graph& g, const RunOptions& o);

  cudaStream_t m_stream = nullptr;
  std::unique_ptr<CachingAllocator> m_alloc;
  std::unique_ptr<GemmEngine> m_gemm;
  std::unique_ptr<NcclRanks> m_ranks;
};

// For the registry (backends/registry.cpp).
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend();

}  // namespace perfsim::cuda
