// The engine attention sweep on the CPU backend: the engine's decode steps run on an engine
// session, and their varlen attention ops (only they) become points of the varlen_decode curves.
#include <doctest/doctest.h>

#include "backends/cpu/cpu_backend.hpp"
#include "core/builders/builders.hpp"
#include "core/calibrate/engine_attention.hpp"
#include "core/calibrate/plan.hpp"
#include "dsl/dsl.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;

TEST_CASE("calibrate: the engine attention sweep times the engine's varlen decode kernels, 16-bit and fp8") {
  cpu::CpuBackend backend;
  const Hardware base = find_hardware(backend.device().catalog_name);
  CalibrationPlan plan;
  plan.run.seed = 3;
  const ModelConfig m = test_models::tiny_llama();
  plan.engine_attention = {{m, 2, 40, false}, {m, 5, 100, false}, {m, 3, 64, true}};
  const SweepContext ctx{backend, base, plan, {}};
  CurveFitter fit;
  SweepSummary s;
  sweep_engine_attention(ctx, 0.0, fit, s);
  CHECK(s.graphs == 3);
  int bits16 = 0, fp8 = 0;
  for (const MeasuredPoint& p : fit.recorded()) {
    CHECK(p.op.kind == OpKind::varlen_flash_attention);
    CHECK(p.op.attrs.seq_q == 1);
    CHECK(p.measured_seconds > 0);
    if (p.curve.key.ends_with("/varlen_decode")) ++bits16;
    if (p.curve.key.ends_with("/varlen_decode_fp8kv")) ++fp8;
  }
  // One attention op per layer of each step graph.
  CHECK(bits16 == 2 * m.layers);
  CHECK(fp8 == m.layers);
  // Each precision's curve and its GQA group's (tiny-llama: 4 heads over 2 KV heads).
  const auto curves = fit.curves();
  CHECK(curves.size() == 4);
  CHECK(curves.count("flash_attention/fp32/memory/varlen_decode_q4") + curves.count("flash_attention/bf16/memory/varlen_decode_q4") == 1);
  for (const auto& [key, curve] : curves) CHECK(key.find("/varlen_decode") != std::string::npos);

  CalibrationPlan none;
  SweepSummary skipped;
  sweep_engine_attention(SweepContext{backend, base, none, {}}, 0.0, fit, skipped);
  CHECK(skipped.fitted == "skipped: no cases in this plan");
}

TEST_CASE("calibrate: every engine attention case of the plans is a step the engine builds") {
  for (const bool quick : {true, false})
    for (const char* backend : {"cuda", "cpu"})
      for (const EngineAttentionCase& c : make_calibration_plan(backend, quick).engine_attention) {
        EngineStepShape s;
        s.q_len.assign(static_cast<std::size_t>(c.seqs), 1);
        s.kv_len.assign(static_cast<std::size_t>(c.seqs), c.context);
        s.sampled = c.seqs;
        s.table_width = (c.model.max_seq + 15) / 16;
        s.pool_blocks = c.seqs * s.table_width + 1;
        CHECK_NOTHROW((void)build_engine_step(c.model, s));
      }
}
