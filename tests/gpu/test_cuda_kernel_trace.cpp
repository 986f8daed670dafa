// CUPTI's records of the device's work (backends/cuda/kernel_trace.hpp) and the op times the
// CUDA backend takes from them when PERFSIM_OP_TIMING=cupti: records between begin() and
// end() only, a replayed graph's nodes followed back through instantiation, and op times that
// agree with event timing where events are exact enough (ops of tens of µs). Skipped, with the
// reason, where CUPTI cannot be used.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <stdexcept>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/kernel_trace.hpp"
#include "backends/common/measurement.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;

namespace {

// PERFSIM_OP_TIMING set for the scope, unset after.
struct OpTiming {
  explicit OpTiming(const char* method) { setenv("PERFSIM_OP_TIMING", method, 1); }
  ~OpTiming() { unsetenv("PERFSIM_OP_TIMING"); }
  OpTiming(const OpTiming&) = delete;
  OpTiming& operator=(const OpTiming&) = delete;
};

cuda::KernelTrace* trace_or_skip() {
  cuda::KernelTrace* t = cuda::KernelTrace::get();
  if (t == nullptr) MESSAGE("CUPTI not usable here (" << cuda::KernelTrace::why() << "): skipped");
  return t;
}

Graph llama_layer_decode(bool graphed) {
  ModelConfig m = test_models::llama3_8b();
  m.vocab = 1024;
  Workload w;
  w.phase = Phase::decode;
  w.batch = 4, w.prompt = 256, w.new_tokens = 8;
  std::vector<StackStep> stack{{"step", {PassSpec{"bf16", std::nullopt}, PassSpec{"flash_attention", std::nullopt}}}};
  BuildOptions b;
  b.layers = 1;
  Graph g = build_stack_graph(m, w, stack, 0, b);
  g.graphed = graphed;
  return g;
}

}  // namespace

TEST_CASE("kernel trace: PERFSIM_OP_TIMING asks for it by name") {
  CHECK_FALSE(cuda::KernelTrace::requested());  // unset: event timing
  {
    const OpTiming t("events");
    CHECK_FALSE(cuda::KernelTrace::requested());
  }
  {
    const OpTiming t("cupti");
    CHECK(cuda::KernelTrace::requested());
  }
  const OpTiming t("cuda-events");
  CHECK_THROWS_WITH_AS((void)cuda::KernelTrace::requested(),
                       doctest::Contains("PERFSIM_OP_TIMING=cuda-events is not a timing method: use cupti or events"),
                       std::runtime_error);
  // The backend refuses it before anything runs.
  CHECK_THROWS_WITH_AS(cuda::CudaBackend(), doctest::Contains("PERFSIM_OP_TIMING=cuda-events"), std::runtime_error);
}

TEST_CASE("kernel trace: records the device's work between begin() and end() only") {
  cuda::KernelTrace* trace = trace_or_skip();
  if (trace == nullptr) return;
  cudaStream_t s = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamCreate(&s));
  constexpr std::size_t bytes = std::size_t{64} << 20;
  void *a = nullptr, *b = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&a, bytes));
  PERFSIM_CUDA_CHECK(cudaMalloc(&b, bytes));
  trace->begin();
  PERFSIM_CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, s));
  PERFSIM_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<cuda::TraceRecord> records = trace->end();
  REQUIRE(records.size() >= 2);
  std::sort(records.begin(), records.end(), [](const auto& x, const auto& y) { return x.start_ns < y.start_ns; });
  for (std::size_t i = 0; i < records.size(); ++i) {
    CHECK(records[i].end_ns > records[i].start_ns);
    CHECK(records[i].node == 0);  // not from a graph
    if (i > 0) CHECK(records[i].start_ns >= records[i - 1].end_ns);  // one stream: in order
  }
  // 64 MiB set and copied at HBM speed: tens of µs each, not ns and not seconds.
  const double span = static_cast<double>(records.back().end_ns - records.front().start_ns) * 1e-9;
  CHECK(span > 10e-6);
  CHECK(span < 0.1);
  PERFSIM_CUDA_CHECK(cudaMemsetAsync(a, 0, bytes, s));
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  trace->begin();
  CHECK(trace->end().empty());
  (void)cudaFree(a);
  (void)cudaFree(b);
  (void)cudaStreamDestroy(s);
}

TEST_CASE("kernel trace: a replay's op times agree with event nodes on ops of tens of µs") {
  if (trace_or_skip() == nullptr) return;
  const OpTiming cupti("cupti");
  const Graph g = llama_layer_decode(true);
  cuda::CachingAllocator alloc;
  cuda::GemmEngine gemm;
  cudaStream_t stream = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    cuda::GraphRunner runner(g, 3, alloc, gemm, stream);
    (void)runner.run_once();
    runner.capture();
    REQUIRE(runner.traces_ops());
    REQUIRE(runner.capture_timed().empty());
    std::vector<std::vector<double>> traced(g.ops.size()), evented(g.ops.size());
    for (int r = 0; r < 51; ++r) {
      if (r == 20)  // warmed up
        for (std::size_t i = 0; i < g.ops.size(); ++i) traced[i].clear(), evented[i].clear();
      REQUIRE(runner.replay_traced(traced));
      (void)runner.replay_timed(1, &evented);
    }
    int compared = 0;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      CAPTURE(g.ops[i].name);
      const double t = median_or_zero(traced[i]), e = median_or_zero(evented[i]);
      CHECK(t > 0);
      // An event pair around the op adds its own cost (a few µs, PERFORMANCE.md); on an op of
      // tens of µs both name the same kernels' time.
      if (e > 20e-6) {
        ++compared;
        CHECK(t == doctest::Approx(e).epsilon(0.25));
      }
    }
    CHECK(compared >= 3);  // the layer's large GEMMs
  }
  (void)cudaStreamDestroy(stream);
}

TEST_CASE("kernel trace: the backend times replayed ops from the records when asked") {
  if (trace_or_skip() == nullptr) return;
  cuda::CudaBackend be;
  RunOptions o;
  o.warmup = 2, o.repeats = 5;
  const Graph g = llama_layer_decode(true);
  CHECK(be.run(g, o).op_timing == "event nodes");  // the default
  const OpTiming cupti("cupti");
  const Measurement m = be.run(g, o);
  CHECK(m.op_timing == "CUPTI records");
  double sum = 0;
  for (const OpMeasurement& om : m.ops) {
    CHECK(om.median > 0);
    sum += om.median;
  }
  // Back to back on one stream: the ops fit in the replay as it ran, less its launch.
  CHECK(sum <= m.executed_wall);
  CHECK(sum >= 0.75 * m.executed_wall);
  MESSAGE(fmt::format("llama-3-8b layer decode, replayed: step {:.2f} us, Σ op times {:.2f} us",
                      m.executed_wall * 1e6, sum * 1e6));
  // Eager steps keep their events.
  CHECK(be.run(llama_layer_decode(false), o).op_timing == "events");
}
