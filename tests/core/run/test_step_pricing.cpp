// A stack step priced on the scenario's hardware: one GPU's graph and a layout's rank graphs go
// through the same what-if loop, and a step that does not fit searches what would.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "approx.hpp"
#include "core/run/step_pricing.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

Hardware gpu(const std::string& name, double memory_bytes, int node_gpus) {
  Hardware hw;
  hw.name = name;
  hw.peak_flops[static_cast<int>(DType::bf16)] = 989e12;
  hw.peak_flops[static_cast<int>(DType::fp32)] = 67e12;
  hw.memory_bytes = memory_bytes;
  hw.memory_bandwidth = 3.35e12;
  hw.nvlink = {450e9, 3e-6};
  hw.infiniband = {50e9, 5e-6};
  hw.gpus_per_node = node_gpus;
  hw.sm_count = 132;
  hw.collective_sms = 16;
  return hw;
}

// Llama-3-8B training, one layer built, priced first on `primary`.
Scenario training(const ParallelSpec& layout, const Hardware& primary) {
  Scenario s;
  s.name = "step-pricing";
  s.model = test_models::llama3_8b();
  s.workload.phase = Phase::train;
  s.workload.batch = 1;
  s.workload.seq = 1024;
  s.workload.grad_accum = 4;
  s.hardware = {primary, gpu("roomy", 1e15, 8), gpu("small-nodes", 1e15, 4)};
  s.parallel = layout;
  s.stacks = {StackStep{"bf16", {PassSpec{"bf16"}, PassSpec{"flash_attention"}}, ""}};
  s.execute.layers = 1;
  return s;
}

StepResult priced(const Scenario& s) {
  ParallelSpec layout = step_parallel(s.parallel, s.stacks, 0);
  layout.node_gpus = s.hardware.front().gpus_per_node;
  const StepGraphs graphs(s, s.stacks, 0, layout);
  StepResult r;
  predict_step(r, graphs, s.hardware.front(), true);
  return r;
}

}  // namespace

TEST_CASE("step pricing: one GPU and a layout price every other hardware as a what-if") {
  for (const int dp : {1, 4}) {
    CAPTURE(dp);
    ParallelSpec layout;
    layout.dp = dp;
    const StepResult r = priced(training(layout, gpu("primary", 1e15, 8)));
    CHECK(r.predicted.hardware == "primary");
    CHECK(r.predicted.fits);
    CHECK_FALSE(r.fit_searched);
    REQUIRE(r.what_if.size() == 2);
    CHECK(r.what_if[0].hardware == "roomy");
    CHECK(r.what_if[1].hardware == "small-nodes");
    CHECK(r.layout.has_value() == (dp > 1));
    if (dp == 1) {
      CHECK(r.what_if_layout.empty());
      continue;
    }
    CHECK_FALSE(r.layout->fit_searched);
    REQUIRE(r.what_if_layout.size() == 2);
    // Hardware of another node size gets rank graphs of its own.
    CHECK(r.what_if_layout[0].layout.node_gpus == 8);
    CHECK(r.what_if_layout[1].layout.node_gpus == 4);
    for (std::size_t i = 0; i < 2; ++i) CHECK(r.what_if[i].step_time == approx(r.what_if_layout[i].step_time));
  }
}

TEST_CASE("step pricing: a step that does not fit searches layouts of its GPUs, or more GPUs for one") {
  const Hardware small = gpu("primary", 80e9, 8);
  ParallelSpec ddp;
  ddp.dp = 8;
  const StepResult layout = priced(training(ddp, small));
  REQUIRE(layout.layout.has_value());
  CHECK_FALSE(layout.predicted.fits);
  CHECK(layout.layout->fit_searched);
  CHECK_FALSE(layout.fit_searched);

  // ZeRO on one GPU is a layout, yet what fits is a question of more GPUs, as with none.
  ParallelSpec one;
  one.zero = 1;
  for (const ParallelSpec& p : {one, ParallelSpec{}}) {
    CAPTURE(p.zero);
    const StepResult r = priced(training(p, small));
    CHECK(r.layout.has_value() == (p.zero == 1));
    CHECK_FALSE(r.predicted.fits);
    CHECK(r.fit_searched);
    CHECK(r.fit_gpus >= 2);
    if (r.layout) CHECK_FALSE(r.layout->fit_searched);
  }
}
