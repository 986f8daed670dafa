// Every op kind through the CPU backend (the reference): each kind has samples at every float
// precision (tests/support/op_samples.hpp) and a CPU kernel; each sample runs, writes finite
// values into every output, gives the same values when run again, and at bf16 and fp16 stays
// close to the same sample at fp32. tests/gpu/test_backend_ops_gpu.cpp runs the same samples
// on the GPU against these results.
#include <doctest/doctest.h>

#include <cmath>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_kernel_table.hpp"
#include "cpu_test_util.hpp"
#include "op_samples.hpp"

using namespace perfsim;
using perfsim::cpu::test::rel_err;

namespace {

constexpr uint64_t seed = 17;

std::vector<std::vector<float>> run_on_cpu(const test::OpSample& s) {
  return cpu::CpuBackend().evaluate(s.graph, seed, test::sample_outputs(s), s.writes);
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

bool any_nonzero(const std::vector<float>& v) {
  for (float x : v)
    if (x != 0.0f) return true;
  return false;
}

}  // namespace

TEST_CASE("backend ops: every kind has samples at every precision and a CPU kernel") {
  int sampled = 0;
  for (std::size_t i = 0; i < op_kind_count; ++i) {
    const OpKind k = op_kind_at(i);
    CAPTURE(name_of(k));
    if (!test::is_sampled(k)) continue;
    ++sampled;
    CHECK_MESSAGE(cpu::has_kernel(k), "a kind needs a CPU kernel: the reference every backend is checked against");
    for (DType d : test::sample_dtypes) {
      CAPTURE(name_of(d));
      CHECK_MESSAGE(!test::op_samples(k, d).empty(), "add the kind's samples to tests/support/op_samples.cpp");
    }
  }
  CHECK(sampled + 2 == static_cast<int>(op_kind_count));  // all but collective and host
}

TEST_CASE("backend ops: every sample runs on the CPU, finite, repeatable and close to fp32") {
  for (std::size_t i = 0; i < op_kind_count; ++i) {
    const OpKind k = op_kind_at(i);
    if (!test::is_sampled(k)) continue;
    const std::vector<test::OpSample> reference = test::op_samples(k, DType::fp32);
    for (DType d : test::sample_dtypes) {
      const std::vector<test::OpSample> samples = test::op_samples(k, d);
      REQUIRE(samples.size() == reference.size());
      for (std::size_t j = 0; j < samples.size(); ++j) {
        const test::OpSample& s = samples[j];
        CAPTURE(s.label);
        const std::vector<std::vector<float>> got = run_on_cpu(s);
        CHECK(run_on_cpu(s) == got);  // nothing read uninitialized, no order-dependent sums
        const std::vector<std::vector<float>> want = run_on_cpu(reference[j]);
        const std::vector<int> outs = test::sample_outputs(s);
        REQUIRE(got.size() == outs.size());
        // Integer outputs (a router's choices) decided on rounded logits may differ from fp32's,
        // and so then may everything after them.
        // Samples of another structure at low precision (AdamW's fp32 master and its copy) have
        // no fp32 twin to compare with.
        // A max pool's backward routes dy to each window's maximum, which rounding to 16 bits
        // can tie or reorder: its outputs are compared at fp32 only.
        bool same_choices = reference[j].graph.tensors.size() == s.graph.tensors.size() && k != OpKind::maxpool_bwd;
        for (std::size_t o = 0; o < outs.size(); ++o)
          if (same_choices && s.graph.tensor(outs[o]).dtype == DType::int32 && got[o] != want[o]) same_choices = false;
        for (std::size_t o = 0; o < outs.size(); ++o) {
          CAPTURE(s.graph.tensor(outs[o]).name);
          CHECK(all_finite(got[o]));
          CHECK(any_nonzero(got[o]));
          if (d != DType::fp32 && same_choices)
            CHECK(rel_err(got[o], want[o]) < (d == DType::bf16 ? 3e-2 : 5e-3));
        }
      }
    }
  }
}
