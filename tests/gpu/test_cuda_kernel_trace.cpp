// CUPTI's records of the device's work (backends/cuda/kernel_trace.hpp) and the op times the
// CUDA backend takes from them: tagged eager launches, a replayed graph's nodes followed back
// through instantiation, and op times that agree with event timing where events are exact
// enough (ops of tens of µs). Skipped, with the reason, where CUPTI cannot be used.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/kernel_trace.hpp"
#include "backends/measurement.hpp"
#include "core/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;

namespace {

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

TEST_CASE("kernel trace: eager work is recorded with the tag around its launch") {
  cuda::KernelTrace* trace = trace_or_skip();
  if (trace == nullptr) return;
  cudaStream_t s = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamCreate(&s));
  constexpr std::size_t bytes = std::size_t{64} << 20;
  void *a = nullptr, *b = nullptr;
  PERFSIM_CUDA_CHECK(cudaMalloc(&a, bytes));
  PERFSIM_CUDA_CHECK(cudaMalloc(&b, bytes));
  trace->begin();
  {
    const cuda::TagScope tag(trace, 7);
    PERFSIM_CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, s));
  }
  {
    const cuda::TagScope tag(trace, 8);
    PERFSIM_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  }
  PERFSIM_CUDA_CHECK(cudaMemsetAsync(b, 0, 16, s));  // untagged
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<cuda::TraceRecord> records = trace->end();
  int tagged7 = 0, tagged8 = 0, untagged = 0;
  uint64_t end7 = 0, start8 = UINT64_MAX;
  for (const cuda::TraceRecord& r : records) {
    CHECK(r.end_ns > r.start_ns);
    CHECK(r.node == 0);  // not from a graph
    if (r.tag == 7) ++tagged7, end7 = std::max(end7, r.end_ns);
    if (r.tag == 8) ++tagged8, start8 = std::min(start8, r.start_ns);
    if (r.tag == 0) ++untagged;
  }
  CHECK(tagged7 >= 1);
  CHECK(tagged8 >= 1);
  CHECK(untagged >= 1);
  CHECK(start8 >= end7);  // one stream: in order
  // Nothing is recorded outside begin() / end().
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

TEST_CASE("kernel trace: the backend times replayed and held eager ops from the records") {
  if (trace_or_skip() == nullptr) return;
  cuda::CudaBackend be;
  RunOptions o;
  o.warmup = 2, o.repeats = 5;
  for (bool graphed : {true, false}) {
    CAPTURE(graphed);
    const Graph g = llama_layer_decode(graphed);
    const Measurement m = be.run(g, o);
    CHECK(m.op_timing == "CUPTI records");
    double sum = 0;
    for (const OpMeasurement& om : m.ops) {
      const double device = graphed ? om.median : om.device;
      CHECK(device > 0);
      sum += device;
    }
    // Back to back on one stream: the ops' device times fit in the step as it ran.
    CHECK(sum <= m.executed_wall);
    MESSAGE(fmt::format("llama-3-8b layer decode, graphed {}: step {:.2f} us, Σ op device times {:.2f} us", graphed,
                        m.executed_wall * 1e6, sum * 1e6));
  }
}
