// An engine step's price: its pieces against the graphs they come from, the interpolation
// exact where it was built, CUDA-graph capture sizes, and the KV pool's size by hand.
#include <doctest/doctest.h>

#include "core/builders/builders.hpp"
#include "core/cost/cost_model.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/serve/scheduler_config.hpp"
#include "core/serve/simulate.hpp"
#include "core/serve/step_price.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;

namespace {

std::vector<StackStep> stack(std::vector<PassSpec> passes) { return {StackStep{"s", std::move(passes), ""}}; }

double graph_seconds(const ModelConfig& m, const Hardware& hw, const Workload& w, const std::vector<StackStep>& st,
                     int tp = 1, int pp = 1, int stage = 0, int* collectives = nullptr) {
  BuildOptions o = BuildOptions::sampled(1);
  o.parallel.tp = tp;
  o.parallel.pp = pp;
  o.stage = stage;
  const Graph g = build_stack_graph(m, w, st, 0, o);
  const Prediction p = predict(g, hw);
  double t = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    t += p.ops[i].time * g.ops[i].count;
    if (collectives != nullptr && g.ops[i].kind == OpKind::collective) *collectives += 1;
  }
  return t;
}

Workload decode(int64_t batch, int64_t kv) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = batch;
  w.prompt = kv - 1;
  w.new_tokens = 1;
  return w;
}

}  // namespace

TEST_CASE("serve price: a decode step of n sequences at one context is the decode graph") {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  const auto st = stack({{"bf16"}, {"flash_attention"}});
  StepPricer pricer(m, hw, st, 0);
  // Eight sequences decoding at context 128 (the line's first point): dense + head + attention
  // of the decode graph of batch 8 at kv 128, plus the host's step.
  EngineStep step;
  for (int i = 0; i < 8; ++i) step.seqs.push_back(SeqWork{i, 1, 127, true, false});
  CHECK(pricer.price(step) == doctest::Approx(graph_seconds(m, hw, decode(8, 128), st) + hw.host_overhead));
  // At a context between the two built ones the attention is on the line between them.
  const double a128 = pricer.decode_attention(8, 128), a2048 = pricer.decode_attention(8, 255);
  CHECK(pricer.decode_attention(8, 191.5) == doctest::Approx((a128 + a2048) / 2));
}

TEST_CASE("serve price: a TP2 engine's step is its rank graph, all-reduces included; a PP2 step sums its stages") {
  const ModelConfig m = test_models::tiny_llama();  // 4 layers, 2 KV heads
  const Hardware hw = test_models::h100_node();
  const auto st = stack({{"bf16"}, {"flash_attention"}});
  EngineStep step;
  for (int i = 0; i < 8; ++i) step.seqs.push_back(SeqWork{i, 1, 127, true, false});
  ParallelSpec tp2;
  tp2.tp = 2;
  StepPricer tp(m, hw, st, 0, tp2);
  int collectives = 0;
  const double rank = graph_seconds(m, hw, decode(8, 128), st, 2, 1, 0, &collectives);
  CHECK(collectives > 0);  // the rank graph's all-reduces are in the price
  CHECK(tp.price(step) == doctest::Approx(rank + hw.host_overhead));
  // Each GPU holds one of the two KV heads: 256 bytes a token of the single GPU's 512.
  CHECK(tp.kv_bytes_per_token() == doctest::Approx(256));
  ParallelSpec pp2;
  pp2.pp = 2;
  StepPricer pp(m, hw, st, 0, pp2);
  const double stages = graph_seconds(m, hw, decode(8, 128), st, 1, 2, 0) + graph_seconds(m, hw, decode(8, 128), st, 1, 2, 1);
  CHECK(pp.price(step) == doctest::Approx(stages + hw.host_overhead));
  CHECK(pp.kv_bytes_per_token() == doctest::Approx(256));  // two of the four layers a stage
  // The latency through both stages is more than a single GPU's step (the stage send and receive).
  StepPricer one(m, hw, st, 0);
  CHECK(pp.price(step) > one.price(step));
}

TEST_CASE("serve price: a prompt's price is the prefill graph's") {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  const auto st = stack({{"bf16"}, {"flash_attention"}});
  StepPricer pricer(m, hw, st, 0);
  EngineStep step;
  step.seqs.push_back(SeqWork{0, 64, 0, true, false});
  Workload w;
  w.phase = Phase::prefill;
  w.batch = 1;
  w.prompt = 64;
  w.new_tokens = 1;
  // The prefill graph's head runs on one last token, as the step's one sampling sequence.
  CHECK(pricer.price(step) == doctest::Approx(graph_seconds(m, hw, w, st) + hw.host_overhead).epsilon(0.02));
  // A chunk after cached tokens costs more attention than the same chunk from position 0.
  CHECK(pricer.prefill_attention(1, 64, 128) > pricer.prefill_attention(1, 64, 0));
}

TEST_CASE("serve price: the engine's host work per op and per step is paid by eager steps only") {
  const ModelConfig m = test_models::tiny_llama();  // 4 layers
  Hardware hw = test_models::h100_node();
  const auto st = stack({{"bf16"}, {"flash_attention"}, {"cuda_graphs"}});
  StepPricer plain(m, hw, st, 0);
  hw.engine_host_per_op = 1e-6;
  hw.engine_host_per_step = 5e-4;
  StepPricer with_host(m, hw, st, 0);
  // The step's ops over all layers: the decode graph's, each layer's counted once per layer.
  const Graph g = build_stack_graph(m, decode(1, 2), stack({{"bf16"}, {"flash_attention"}}), 0);
  const auto ops = static_cast<double>(g.ops.size());
  EngineStep prompt;
  prompt.seqs.push_back(SeqWork{0, 16, 0, true, false});
  CHECK(with_host.price(prompt) - plain.price(prompt) == doctest::Approx(5e-4 + 1e-6 * ops));
  CHECK(with_host.host(prompt) == doctest::Approx(hw.host_overhead + 5e-4 + 1e-6 * ops));
  // A decode-only step replays a CUDA graph: no per-step preparation.
  EngineStep decodes;
  for (int i = 0; i < 4; ++i) decodes.seqs.push_back(SeqWork{i, 1, 20, true, false});
  CHECK(with_host.price(decodes) == doctest::Approx(plain.price(decodes)));
}

TEST_CASE("serve price: CUDA-graph capture sizes follow vLLM's") {
  CHECK(StepPricer::capture_size(1) == 1);
  CHECK(StepPricer::capture_size(2) == 2);
  CHECK(StepPricer::capture_size(3) == 4);
  CHECK(StepPricer::capture_size(5) == 8);
  CHECK(StepPricer::capture_size(9) == 16);
  CHECK(StepPricer::capture_size(17) == 24);
  CHECK(StepPricer::capture_size(512) == 512);
  CHECK(StepPricer::capture_size(513) == 0);
}

TEST_CASE("serve price: the KV pool is what the GPU has left, in blocks") {
  const ModelConfig m = test_models::tiny_llama();  // 4 layers, 2 KV heads of 16, bf16 cache
  Hardware hw = test_models::h100_node();
  const auto st = stack({{"bf16"}, {"flash_attention"}, {"paged_kv"}});
  StepPricer pricer(m, hw, st, 0);
  // K and V, 4 layers, 2 KV heads × head_dim 16, 2 bytes: 2 · 4 · 32 · 2 = 512 bytes a token.
  CHECK(pricer.kv_bytes_per_token() == doctest::Approx(512));
  SchedulerConfig c = scheduler_config(st, 0);
  hw.memory_bytes = 1e9;
  const KvPool pool = kv_pool(pricer, c, hw, m.max_seq, m.name);
  const double besides = pricer.memory_besides_kv(c.step_tokens(m.max_seq), c.max_batch);
  CHECK(pool.block == 16);
  CHECK(pool.block_bytes == doctest::Approx(16 * 512));
  CHECK(pool.blocks == static_cast<int64_t>((0.9e9 - besides) / (16 * 512)));
  // A GPU too small for the weights has no pool: one clear error.
  hw.memory_bytes = besides / 0.9 * 0.5;
  CHECK_THROWS_AS((void)kv_pool(pricer, c, hw, m.max_seq, m.name), ConfigError);
}

TEST_CASE("serve price: an fp8 KV cache holds twice the tokens in the same memory") {
  const ModelConfig m = test_models::tiny_llama();
  Hardware hw = test_models::h100_node();
  hw.memory_bytes = 1e9;
  const auto bf16 = stack({{"bf16"}, {"flash_attention"}, {"paged_kv"}});
  const auto fp8 = stack({{"bf16"}, {"flash_attention"}, {"paged_kv"}, {"fp8_kv"}});
  StepPricer p16(m, hw, bf16, 0), p8(m, hw, fp8, 0);
  // K and V, 4 layers, 2 KV heads × head_dim 16, 1 byte: 2 · 4 · 32 · 1 = 256 bytes a token.
  CHECK(p8.kv_bytes_per_token() == doctest::Approx(256));
  const SchedulerConfig c = scheduler_config(fp8, 0);
  const KvPool pool8 = kv_pool(p8, c, hw, m.max_seq, m.name);
  const KvPool pool16 = kv_pool(p16, scheduler_config(bf16, 0), hw, m.max_seq, m.name);
  CHECK(pool8.block_bytes == doctest::Approx(16 * 256));
  // The weights and activations are the same (within a few KB of step buffers); the block is
  // half as large, so the pool holds twice the blocks.
  const double besides = p8.memory_besides_kv(c.step_tokens(m.max_seq), c.max_batch);
  CHECK(besides == doctest::Approx(p16.memory_besides_kv(c.step_tokens(m.max_seq), c.max_batch)).epsilon(1e-3));
  CHECK(pool8.blocks == static_cast<int64_t>((0.9e9 - besides) / (16 * 256)));
  CHECK(static_cast<double>(pool8.blocks) / static_cast<double>(pool16.blocks) == doctest::Approx(2).epsilon(1e-3));
}

TEST_CASE("serve knobs: cumulative, reset by a new scheduler, contradictions refused") {
  auto knobs = [](std::vector<StackStep> s) { return scheduler_config(s, s.size() - 1); };
  const StackStep st{"static", {{"scheduler", std::nullopt, "static"}, {"max_batch", 8}}, ""};
  const StackStep dyn{"dynamic", {{"scheduler", std::nullopt, "dynamic"}, {"max_wait", 0.01}}, ""};
  const StackStep cont{"continuous", {{"scheduler", std::nullopt, "continuous"}}, ""};
  CHECK(knobs({st}).max_batch == 8);
  CHECK(knobs({st, dyn}).max_batch == 32);  // reset by the new scheduler
  CHECK(knobs({st, dyn}).max_wait == 0.01);
  const SchedulerConfig c = knobs({st, dyn, cont});
  CHECK(c.kind == SchedulerKind::continuous);
  CHECK(c.max_batch == 256);
  CHECK(c.max_wait == 0);
  CHECK(c.step_tokens(8192) == 8192);
  CHECK(c.step_tokens(1024) == 2048);
  CHECK(knobs({cont, StackStep{"+chunked", {{"chunked_prefill", 512}}, ""}}).step_tokens(8192) == 512);
  CHECK(knobs({cont, StackStep{"+paged", {{"paged_kv", 32.0}}, ""}}).block == 32);

  auto error = [&](std::vector<StackStep> s) {
    try {
      (void)knobs(std::move(s));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error({cont, StackStep{"bad", {{"max_wait", 0.01}}, "f.lua:9: "}}) ==
        "f.lua:9: step 'bad': 'max_wait' is a dynamic batching knob, but the scheduler here is continuous (set "
        "scheduler = \"dynamic\", or drop max_wait)");
  CHECK(error({st, StackStep{"bad", {{"chunked_prefill", 256}}, ""}}).find("needs scheduler = \"continuous\"") !=
        std::string::npos);
  CHECK(error({cont, StackStep{"bad", {{"prefix_cache"}}, ""}}).find("needs 'paged_kv'") != std::string::npos);
  CHECK(error({cont, StackStep{"bad", {{"max_tokens", 100}, {"chunked_prefill", 100}}, ""}}).find("either") !=
        std::string::npos);
  // The knob's value is checked where it is written.
  CHECK_THROWS_AS(validate(PassSpec{"scheduler", std::nullopt, "contineous"}), ConfigError);
  CHECK_THROWS_AS(validate(PassSpec{"gpu_memory", 1.5}), ConfigError);
  CHECK_THROWS_AS(validate(PassSpec{"max_batch", 0.0}), ConfigError);
  CHECK_THROWS_AS(validate(PassSpec{"bf16", std::nullopt, "yes"}), ConfigError);
}

TEST_CASE("serve price: with flash attention and paged KV, decode attention is the engine's varlen kernel") {
  const ModelConfig m = test_models::tiny_llama();
  Hardware hw = test_models::h100_node();
  const auto st = stack({{"bf16"}, {"flash_attention"}, {"paged_kv"}});
  // The engine's step graph of 8 decodes at 128 keys: its attention ops (varlen attention and
  // the K/V appends), priced as the step price sums them.
  EngineStepShape s;
  s.q_len.assign(8, 1);
  s.kv_len.assign(8, 128);
  s.sampled = 8;
  s.table_width = (m.max_seq + 15) / 16;
  s.pool_blocks = 8 * 8 + 1;
  auto engine_attention = [&](const Hardware& h) {
    Graph g = build_engine_step(m, s, BuildOptions::sampled(1));
    apply_graph_pass(PassSpec{"bf16", {}}, g);
    const Prediction p = predict(g, h);
    double t = 0, varlen = 0;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      if (op.layer < 0 || (op.kind != OpKind::varlen_flash_attention && op.kind != OpKind::varlen_kv_append)) continue;
      t += p.ops[i].time * op.count;
      if (op.kind == OpKind::varlen_flash_attention) varlen += p.ops[i].time * op.count;
    }
    return std::make_pair(t, varlen);
  };
  CHECK(StepPricer(m, hw, st, 0).decode_attention(8, 128) == doctest::Approx(engine_attention(hw).first));
  // A profile curve for the varlen kernel of this GQA group (2 query heads a KV head) moves it,
  // where the split-KV kernel's paged curve did before.
  hw.calibration.kernels["flash_attention/bf16/memory/varlen_decode_q4"] = EfficiencyCurve{{1e-12, 1.0}, {0.05, 0.05}};
  const auto slow = engine_attention(hw);
  CHECK(StepPricer(m, hw, st, 0).decode_attention(8, 128) == doctest::Approx(slow.first));
  CHECK(slow.second > engine_attention(test_models::h100_node()).second * 2);
  // Without paged KV the decode graph's contiguous attention prices it (the curve is not read).
  const auto flat = stack({{"bf16"}, {"flash_attention"}});
  CHECK(StepPricer(m, hw, flat, 0).decode_attention(8, 128) ==
        doctest::Approx(StepPricer(m, test_models::h100_node(), flat, 0).decode_attention(8, 128)));
}
