// GemmEngine autotuning (backends/cuda/cuda_gemm.hpp): a tuned plan gives cpu::gemm's result,
// with accumulate = true too (the timing launches write a scratch C, so C is accumulated
// once); autotune off keeps the first heuristic; a plan first needed inside a CUDA graph
// capture is not tuned there (the captured graph still computes the right result) and is
// tuned at its next eager call.
#include <doctest/doctest.h>

#include <vector>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "gpu_test_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda;
using namespace perfsim::cuda::test;

namespace {

std::vector<float> cpu_gemm(const std::vector<float>& a, const std::vector<float>& b, std::vector<float> c,
                            const ops::GemmShape& s) {
  cpu::gemm(a.data(), host::Storage::f32, b.data(), host::Storage::f32, c.data(), host::Storage::f32, s, nullptr);
  return c;
}

// One GEMM on `stream`; inputs in storage T, C in TC starting from c0 when accumulating.
template <class T, class TC>
std::vector<float> run_gemm(GemmEngine& e, const std::vector<float>& a, const std::vector<float>& b,
                            const std::vector<float>& c0, const ops::GemmShape& s, Elem t, Elem tc,
                            cudaStream_t stream = nullptr) {
  const DeviceBuffer da = to_device(to_storage<T>(a)), db = to_device(to_storage<T>(b));
  const std::size_t nc = static_cast<std::size_t>(s.batch * s.m * s.n);
  DeviceBuffer dc = s.accumulate ? to_device(to_storage<TC>(c0)) : poisoned<TC>(nc);
  PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());  // the copies ran on the legacy stream
  e.gemm({da.get(), t}, {db.get(), t}, dc.get(), tc, s, false, stream);
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return to_floats(from_device<TC>(dc, nc));
}

// A decode-like skinny shape (where the heuristics' first choice is often not the fastest).
ops::GemmShape skinny(bool accumulate) {
  ops::GemmShape s;
  s.m = 8, s.n = 2048, s.k = 1024, s.accumulate = accumulate;
  return s;
}

}  // namespace

TEST_CASE("cuda gemm: autotuned plans give cpu::gemm's result and accumulate once") {
  GemmEngine e;
  REQUIRE(e.autotune());
  const ops::GemmShape s = skinny(true);
  const auto a = random_vec(static_cast<std::size_t>(s.m * s.k), 11), b = random_vec(static_cast<std::size_t>(s.k * s.n), 12);
  const auto c0 = random_vec(static_cast<std::size_t>(s.m * s.n), 13);
  // fp32: only the summation order differs. Tuning launches 8 × 7 GEMMs; had they written C
  // with beta = 1, C would hold c0 + ~50·A·B.
  const auto want = cpu_gemm(a, b, c0, s);
  CHECK(rel_err(run_gemm<float, float>(e, a, b, c0, s, Elem::f32, Elem::f32), want) < 1e-5);
  CHECK(e.tuned_plans() == 1);
  CHECK(rel_err(run_gemm<float, float>(e, a, b, c0, s, Elem::f32, Elem::f32), want) < 1e-5);  // cached plan
  CHECK(e.cached_plans() == 1);
  // bf16 in and out, fp32 accumulation: the bf16 output rounds (2^-9).
  const auto want16 = cpu_gemm(rounded<host::bf16>(a), rounded<host::bf16>(b), rounded<host::bf16>(c0), s);
  CHECK(rel_err(run_gemm<host::bf16, host::bf16>(e, a, b, c0, s, Elem::bf16, Elem::bf16), want16) < 1e-2);
  CHECK(e.tuned_plans() == 2);
  // Not accumulating: C poisoned, every element written by the real launch. `accumulate` is
  // not part of the plan key (beta is passed per call), so the tuned fp32 plan is reused.
  const ops::GemmShape s0 = skinny(false);
  CHECK(rel_err(run_gemm<float, float>(e, a, b, {}, s0, Elem::f32, Elem::f32), cpu_gemm(a, b, std::vector<float>(c0.size()), s0)) <
        1e-5);
  CHECK(e.cached_plans() == 2);
  CHECK(e.tuned_plans() == 2);
}

TEST_CASE("cuda gemm: autotune off, and plans first needed inside a capture") {
  GemmEngine e;
  const ops::GemmShape s = skinny(true);
  const auto a = random_vec(static_cast<std::size_t>(s.m * s.k), 21), b = random_vec(static_cast<std::size_t>(s.k * s.n), 22);
  const auto c0 = random_vec(static_cast<std::size_t>(s.m * s.n), 23);
  const auto want = cpu_gemm(a, b, c0, s);
  e.set_autotune(false);
  CHECK(rel_err(run_gemm<float, float>(e, a, b, c0, s, Elem::f32, Elem::f32), want) < 1e-5);
  CHECK(e.cached_plans() == 1);
  CHECK(e.tuned_plans() == 0);

  // Autotune on, a new plan (bf16) first needed while capturing: first heuristic, no tuning.
  e.set_autotune(true);
  cudaStream_t stream = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const DeviceBuffer da = to_device(to_storage<host::bf16>(a)), db = to_device(to_storage<host::bf16>(b));
  const DeviceBuffer dc = to_device(to_storage<host::bf16>(c0));
  PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());  // the copies ran on the legacy stream
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  e.gemm({da.get(), Elem::bf16}, {db.get(), Elem::bf16}, dc.get(), Elem::bf16, s, false, stream);
  PERFSIM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(e.cached_plans() == 2);
  CHECK(e.tuned_plans() == 0);
  PERFSIM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  PERFSIM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  PERFSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto want16 = cpu_gemm(rounded<host::bf16>(a), rounded<host::bf16>(b), rounded<host::bf16>(c0), s);
  CHECK(rel_err(to_floats(from_device<host::bf16>(dc, c0.size())), want16) < 1e-2);
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);

  // Its next eager call tunes it (and still accumulates once).
  CHECK(rel_err(run_gemm<host::bf16, host::bf16>(e, a, b, c0, s, Elem::bf16, Elem::bf16, stream), want16) < 1e-2);
  CHECK(e.tuned_plans() == 1);
  CHECK(e.cached_plans() == 2);
  PERFSIM_CUDA_CHECK(cudaStreamDestroy(stream));
}
