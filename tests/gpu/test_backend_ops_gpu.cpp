// Every op kind's samples (tests/support/op_samples.hpp) on the GPU against the CPU backend:
// same seed, same inputs, every output compared (int32 exactly, floats within fp32 1e-4 and
// bf16/fp16 2e-2 of the largest value). A sample the CUDA backend declines says why and is
// counted; every kind must run at least one sample at each precision here.
#include <doctest/doctest.h>

#include <set>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "gpu_test_util.hpp"
#include "op_samples.hpp"

using namespace perfsim;
using perfsim::cuda::test::rel_err;

TEST_CASE("backend ops: every sample on the GPU matches the CPU backend") {
  constexpr uint64_t seed = 17;
  cuda::CudaBackend gpu;
  cpu::CpuBackend cpu;
  int ran = 0, declined = 0;
  for (std::size_t i = 0; i < op_kind_count; ++i) {
    const OpKind k = op_kind_at(i);
    if (!test::is_sampled(k)) continue;
    for (DType d : test::sample_dtypes) {
      bool kind_ran = false;
      for (const test::OpSample& s : test::op_samples(k, d)) {
        CAPTURE(s.label);
        if (const std::string why = gpu.unsupported_reason(s.op(), s.graph); !why.empty()) {
          MESSAGE("not run on the GPU: " << why);
          ++declined;
          continue;
        }
        const std::vector<int> outs = test::sample_outputs(s);
        const auto want = cpu.evaluate(s.graph, seed, outs, s.writes);
        const auto got = gpu.evaluate(s.graph, seed, outs, s.writes);
        REQUIRE(got.size() == want.size());
        for (std::size_t o = 0; o < outs.size(); ++o) {
          const Tensor& t = s.graph.tensor(outs[o]);
          CAPTURE(t.name);
          if (t.dtype == DType::int32) CHECK(got[o] == want[o]);
          else CHECK(rel_err(got[o], want[o]) < (d == DType::fp32 ? 1e-4 : 2e-2));
        }
        kind_ran = true;
        ++ran;
      }
      CAPTURE(name_of(k));
      CAPTURE(name_of(d));
      CHECK_MESSAGE(kind_ran, "no sample of the kind ran on the GPU at this precision");
    }
  }
  MESSAGE("backend ops on the GPU: " << ran << " samples ran, " << declined << " declined");
}
