// Launch-overhead benchmark. Per op, medians over repeated passes of `ops` launches:
//   empty kernel, eager: host wall time of back-to-back launches of an empty kernel + one sync;
//   perfsim eager: GraphRunner::run_once (the backend's dispatch: allocation walk, shape
//     checks, operand staging, launcher) over a graph of `ops` chained 1-row residual_add ops,
//     untimed (no events) and timed (two events per op, as the backend measures);
//   CUDA graph replay: GPU time of one replay of the captured pass (events), the same for
//     `ops` empty kernels captured into a graph.
//   bench_launch [ops=1000] [passes=21] [cols=64]
// A report: exits 0 unless a CUDA call fails. The markdown table is printed last.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/cuda_allocator.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "core/graph/graph.hpp"

namespace {

namespace gpu = perfsim::cuda;
using Clock = std::chrono::steady_clock;

__global__ void empty_kernel() {}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double host_seconds(F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ops chained residual adds: t[i+1] = t[i] + r, t[0] and r fp32 weights [1, cols].
perfsim::Graph residual_chain(int ops, int64_t cols) {
  using namespace perfsim;
  Graph g;
  g.model = "launch bench";
  g.layers_total = g.layers_built = 1;
  auto tensor = [&](std::string name, TensorRole role) {
    Tensor t;
    t.name = std::move(name);
    t.shape = {1, cols};
    t.dtype = DType::fp32;
    t.role = role;
    return g.add_tensor(t);
  };
  const int r = tensor("r", TensorRole::weight);
  int x = tensor("t0", TensorRole::weight);
  for (int i = 0; i < ops; ++i) {
    const int y = tensor("t" + std::to_string(i + 1), TensorRole::activation);
    Op op;
    op.name = "add" + std::to_string(i);
    op.kind = OpKind::residual_add;
    op.dtype = DType::fp32;
    op.inputs = {x, r};
    op.outputs = {y};
    op.attrs.elements = cols;
    g.add_op(op);
    x = y;
  }
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int passes = argc > 2 ? std::atoi(argv[2]) : 21;
  const int64_t cols = argc > 3 ? std::atoll(argv[3]) : 64;
  cudaStream_t stream = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e0));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&e1));

  // Empty kernel, eager.
  auto empty_pass = [&] {
    for (int i = 0; i < ops; ++i) empty_kernel<<<1, 32, 0, stream>>>();
    PERFSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  empty_pass();
  std::vector<double> empty_eager;
  for (int p = 0; p < passes; ++p) empty_eager.push_back(host_seconds(empty_pass) / ops);

  // Empty kernels captured into a graph.
  cudaGraph_t eg = nullptr;
  cudaGraphExec_t eg_exec = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < ops; ++i) empty_kernel<<<1, 32, 0, stream>>>();
  PERFSIM_CUDA_CHECK(cudaStreamEndCapture(stream, &eg));
  PERFSIM_CUDA_CHECK(cudaGraphInstantiate(&eg_exec, eg, 0));
  PERFSIM_CUDA_CHECK(cudaGraphLaunch(eg_exec, stream));
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> empty_graph;
  for (int p = 0; p < passes; ++p) {
    PERFSIM_CUDA_CHECK(cudaEventRecord(e0, stream));
    PERFSIM_CUDA_CHECK(cudaGraphLaunch(eg_exec, stream));
    PERFSIM_CUDA_CHECK(cudaEventRecord(e1, stream));
    PERFSIM_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    empty_graph.push_back(ms * 1e-3 / ops);
  }

  // perfsim's dispatch on a chain of tiny ops.
  const perfsim::Graph g = residual_chain(ops, cols);
  gpu::CachingAllocator alloc;
  gpu::GemmEngine gemm;
  std::vector<double> ours_eager, ours_timed, ours_graph;
  {
    gpu::GraphRunner runner(g, 42, alloc, gemm, stream);
    (void)runner.run_once();  // warm-up: module loads, allocator cache
    for (int p = 0; p < passes; ++p) ours_eager.push_back(host_seconds([&] { (void)runner.run_once(); }) / ops);
    std::vector<std::vector<double>> op_seconds(g.ops.size());
    for (int p = 0; p < passes; ++p)
      ours_timed.push_back(host_seconds([&] { (void)runner.run_once(&op_seconds); }) / ops);
    runner.capture();
    (void)runner.replay(1);
    for (double s : runner.replay(passes)) ours_graph.push_back(s / ops);
  }

  const double empty = median(empty_eager);
  std::printf("RESULT launch ops=%d cols=%lld empty_eager_us=%.3f empty_graph_us=%.3f perfsim_eager_us=%.3f "
              "perfsim_eager_timed_us=%.3f perfsim_graph_us=%.3f\n",
              ops, static_cast<long long>(cols), empty * 1e6, median(empty_graph) * 1e6, median(ours_eager) * 1e6,
              median(ours_timed) * 1e6, median(ours_graph) * 1e6);
  std::printf("\n| per op (median of %d passes of %d ops) | µs | × empty eager launch | goal |\n", passes, ops);
  std::printf("|---|---:|---:|---|\n");
  std::printf("| empty kernel, eager launch + sync / ops | %.3f | 1.00 | |\n", empty * 1e6);
  std::printf("| perfsim eager dispatch, 1-row residual_add (untimed pass) | %.3f | %.2f | ≤ 1.3× |\n",
              median(ours_eager) * 1e6, median(ours_eager) / empty);
  std::printf("| perfsim eager dispatch, timed pass (2 events per op) | %.3f | %.2f | |\n", median(ours_timed) * 1e6,
              median(ours_timed) / empty);
  std::printf("| empty kernel, CUDA graph replay | %.3f | %.2f | |\n", median(empty_graph) * 1e6,
              median(empty_graph) / empty);
  std::printf("| perfsim CUDA graph replay, 1-row residual_add | %.3f | %.2f | ≤ 1.5 µs |\n", median(ours_graph) * 1e6,
              median(ours_graph) / empty);
  (void)cudaGraphExecDestroy(eg_exec);
  (void)cudaGraphDestroy(eg);
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  (void)cudaStreamDestroy(stream);
  return 0;
}
