// CudaBackend: device facts, what it can run, the timed eager and graph-replay loops.
#include "backends/cuda/cuda_backend.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/measurement.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {


CudaBackend::CudaBackend() {
  if (!gpu_present()) throw NotExecutable("cuda backend: no CUDA device is visible");
  PERFSIM_CUDA_CHECK(cudaSetDevice(0));
  PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  m_alloc = std::make_unique<CachingAllocator>(0);
  m_gemm = std::make_unique<GemmEngine>();
}

CudaBackend::~CudaBackend() {
  m_gemm.reset();
  m_alloc.reset();
  if (m_stream != nullptr) (void)cudaStreamDestroy(m_stream);
}

DeviceInfo CudaBackend::device() const {
  DeviceInfo d = query_device(0);
  if (d.catalog_name.empty()) d.name += " (no hardware catalog entry: predictions need --hardware)";
  return d;
}

std::string CudaBackend::unsupported_reason(const Op& op, const Graph& g) const { return op_unsupported_reason(op, g); }

Measurement CudaBackend::run(const Graph& g, const RunOptions& o) {
  if (const std::string why = graph_unsupported_reason(*this, g); !why.empty()) throw NotExecutable(why);
  m_alloc->reset_peak();
  GraphRunner runner(g, o.seed, *m_alloc, *m_gemm, m_stream);

  const int warmup = std::max(0, o.warmup);
  const int repeats = std::max(1, o.repeats);
  for (int r = 0; r < warmup; ++r) (void)runner.run_once();
  std::vector<std::vector<double>> samples(g.ops.size());
  std::vector<double> walls;
  for (int r = 0; r < repeats; ++r) walls.push_back(runner.run_once(&samples));

  Measurement m = summarize_runs(g, samples, walls, name(), device().name, warmup, repeats);
  if (g.graphed) {
    // The replayed step as built (side streams included: the replay's end event follows the
    // graph's last node, after every side branch joined stream 0); sampled layers scale it by
    // the eager passes' ratio of scaled (× count) to built op time, the only per-layer split
    // a replay cannot give. The ratio is taken over op times, not over summarize_runs's
    // step_time, which may already account for overlap between streams.
    double built = 0, scaled = 0;
    for (std::size_t i = 0; i < m.ops.size(); ++i) {
      built += m.ops[i].median;
      scaled += m.ops[i].median * g.ops[i].count;
    }
    runner.capture();
    (void)runner.replay(1);
    const double replay = median_of(runner.replay(repeats));
    m.executed_wall = replay;
    m.step_time = built > 0 ? replay * (scaled / built) : replay;
    m.graph_replayed = true;
  }
  const CachingAllocator& alloc = runner.allocator();
  m.peak_bytes = alloc.peak_bytes();
  for (TensorRole r : all_tensor_roles) m.bytes_by_role_at_peak[r] = 0;
  for (const auto& [r, b] : alloc.bytes_by_role_at_peak()) m.bytes_by_role_at_peak[r] = b;
  return m;
}

std::vector<std::vector<float>> CudaBackend::evaluate(const Graph& g, uint64_t seed, const std::vector<int>& ids) {
  if (const std::string why = graph_unsupported_reason(*this, g); !why.empty()) throw NotExecutable(why);
  GraphRunner runner(g, seed, *m_alloc, *m_gemm, m_stream);
  std::vector<char> keep(g.tensors.size(), 0);
  for (int id : ids) keep.at(static_cast<std::size_t>(id)) = 1;
  if (g.graphed) {
    (void)runner.run_once(nullptr, &keep);  // uploads AdamW descriptors, warms the cache
    runner.reset_persistent();
    runner.capture(&keep);
    (void)runner.replay(1);
  } else {
    (void)runner.run_once(nullptr, &keep);
  }
  std::vector<std::vector<float>> out;
  out.reserve(ids.size());
  for (int id : ids) out.push_back(runner.read(id));
  return out;
}

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace perfsim::cuda
