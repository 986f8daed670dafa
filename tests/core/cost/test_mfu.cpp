// Model FLOPs and utilisation: the graph's model FLOPs are Megatron's eq. 3 (Narayanan et al.
// 2021, §5.1) for GPT layers, recomputation counts only in HFU, and MFU is over the step's dense
// peak. The paper's own GPT-3 figures (140 TFLOP/s a GPU) are checked in test_report.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "approx.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/formulas.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

// A100 datasheet peaks (dense): 312 TFLOP/s in bf16, 156 in tf32, 19.5 in fp32.
Hardware a100() {
  Hardware hw;
  hw.name = "A100-like";
  hw.kind = "gpu";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 19.5e12;
  hw.peak_flops[static_cast<int>(DType::tf32)] = 156e12;
  hw.peak_flops[static_cast<int>(DType::bf16)] = 312e12;
  hw.peak_flops[static_cast<int>(DType::fp16)] = 312e12;
  hw.memory_bytes = 80e9;
  hw.memory_bandwidth = 2.039e12;
  return hw;
}

Graph gpt3_step(const std::vector<std::string>& passes, int64_t batch = 1) {
  const ModelConfig m = gpt("gpt-3-175b", 96, 12288, 96, 51200, 2048);
  Workload w;
  w.phase = Phase::train;
  w.batch = batch, w.seq = 2048;
  std::vector<StackStep> stack;
  for (const std::string& p : passes) stack.push_back({"+" + p, {{p, {}}}});
  return build_stack_graph(m, w, stack, stack.size() - 1, BuildOptions{1});
}

}  // namespace

TEST_CASE("MFU: a GPT-3 175B step's model FLOPs are Megatron's eq. 3, recomputation only in HFU") {
  const ModelConfig m = gpt("gpt-3-175b", 96, 12288, 96, 51200, 2048);
  // 72·B·s·l·h²·(1 + s/(6h) + V/(12lh)) at B = 1: 2,204,555,173,429,248 (test_formulas.cpp has
  // the paper's batch); every GEMM and attention product of the graph, once, with 1 of 96 layers
  // built and the rest scaled.
  const double f72 = formulas::megatron_train_flops(m, 1, 2048, false);
  const double f96 = formulas::megatron_train_flops(m, 1, 2048, true);
  const Hardware hw = a100();
  const Prediction plain = predict(gpt3_step({"bf16"}), hw);
  CHECK(plain.model_flops == approx(f72).epsilon(1e-12));
  CHECK(plain.mfu_peak == 312e12);  // the bf16 peak: bf16 carries the GEMMs
  CHECK(plain.mfu == approx(f72 / (plain.step_time * 312e12)));
  CHECK(plain.hfu == approx(plain.mfu));  // nothing is recomputed

  // Full recompute: the same model FLOPs over a longer step; the hardware did eq. 3's 96·… form.
  const Prediction rc = predict(gpt3_step({"bf16", "recompute"}), hw);
  CHECK(rc.model_flops == approx(f72).epsilon(1e-12));
  CHECK(rc.step_time > plain.step_time);
  CHECK(rc.hfu / rc.mfu == approx(f96 / f72).epsilon(1e-12));

  // Flash attention: the model's FLOPs do not depend on the kernel; its backward also rebuilds
  // the scores, 2·b·s²·h a layer (a quarter of the attention backward's 8·b·s²·h), which only
  // HFU counts: 2 · 2048² · 12288 · 96 = 9,895,604,649,984.
  const Prediction fa = predict(gpt3_step({"bf16", "flash_attention"}), hw);
  CHECK(fa.model_flops == approx(f72).epsilon(1e-12));
  CHECK(fa.hfu * fa.step_time * 312e12 - f72 == approx(9895604649984.0));

  // fp32 steps are utilised against the fp32 peak.
  const Prediction fp32 = predict(gpt3_step({"fp32"}), hw);
  CHECK(fp32.mfu_peak == 19.5e12);
  CHECK(fp32.mfu == approx(f72 / (fp32.step_time * 19.5e12)));
}
