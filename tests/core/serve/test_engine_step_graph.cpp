// The executed engine's step graph (build_engine_step) and its inputs (plan_engine_step):
// shapes, attention work worked out by hand, and the order and slots of the packed tokens.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>

#include "core/builders/builders.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/run/engine_clock.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;

namespace {

EngineStepShape mixed_step() {
  EngineStepShape s;
  // Two decodes (contexts 4 and 8), a 4-token chunk after 6 cached tokens, a 3-token prompt.
  s.q_len = {1, 1, 4, 3};
  s.kv_len = {5, 9, 10, 3};
  s.sampled = 3;
  s.pool_blocks = 16;
  s.kv_block = 4;
  s.table_width = 64;
  return s;
}

const std::vector<int32_t>& input(const EngineStepPlan& p, const char* name) {
  for (const auto& in : p.inputs)
    if (in.first == name) return in.second;
  FAIL("no input " << name);
  static const std::vector<int32_t> none;
  return none;
}

}  // namespace

TEST_CASE("engine step graph: one varlen paged attention per layer, its work counted by hand") {
  const ModelConfig m = test_models::tiny_llama();  // 4 heads of 16, 2 KV heads
  const Graph g = build_engine_step(m, mixed_step());
  int flashes = 0;
  for (const Op& op : g.ops) {
    CHECK(op.kind != OpKind::attn_scores);
    CHECK(op.kind != OpKind::flash_attention);
    if (op.kind != OpKind::varlen_flash_attention) continue;
    ++flashes;
    CHECK(op.attrs.kv_block == 4);
    CHECK(op.attrs.batch == 4);
    CHECK(op.attrs.rows == 9);         // 1 + 1 + 4 + 3 tokens
    CHECK(op.attrs.decode_seqs == 2);
    CHECK(op.attrs.seq_q == 4);
    CHECK(op.attrs.seq_kv == 10);
    // Σ keys seen: 5 + 9 + (4·6 + 1+2+3+4) + (1+2+3) = 54; rows read 5 + 9 + 10 + 3 = 27.
    CHECK(op.attrs.kv_pairs == doctest::Approx(54));
    CHECK(op.attrs.cols == 27);
    CHECK(op_flops(op, g) == doctest::Approx(4.0 * 4 * 16 * 54));
  }
  CHECK(flashes == m.layers);
  // Each kind of the step is the varlen one: rope, the appends, the attention and the slice.
  std::map<OpKind, int> kinds;
  for (const Op& op : g.ops) ++kinds[op.kind];
  CHECK(kinds[OpKind::varlen_rope] == 2 * m.layers);
  CHECK(kinds[OpKind::varlen_kv_append] == 2 * m.layers);
  CHECK(kinds[OpKind::varlen_slice_last_token] == 1);
  for (OpKind dense : {OpKind::rope, OpKind::kv_append, OpKind::paged_kv_append, OpKind::slice_last_token})
    CHECK(kinds[dense] == 0);
  // The head runs on the three sampling rows only.
  for (const Op& op : g.ops)
    if (op.name == "lm_head") CHECK(op.attrs.m == 3);
}

TEST_CASE("engine step graph: bad steps are refused") {
  EngineStepShape s = mixed_step();
  s.q_len = {4, 1};  // a decode after a prompt
  s.kv_len = {4, 9};
  s.sampled = 2;
  CHECK_THROWS_AS((void)build_engine_step(test_models::tiny_llama(), s), std::invalid_argument);
  CHECK_THROWS_AS((void)build_engine_step(test_models::tiny_gpt(), mixed_step()), ConfigError);
}

TEST_CASE("engine step plan: decodes first, each token at its position and page slot") {
  EngineStep step;
  SeqWork prompt;
  prompt.request = 0, prompt.tokens = 3, prompt.position = 0;
  SeqWork decode;
  decode.request = 1, decode.tokens = 1, decode.position = 5;
  SeqWork padded;  // a static batch's finished sequence: no blocks left
  padded.request = 2, padded.tokens = 1, padded.position = 2, padded.samples = false, padded.padding = true;
  step.seqs = {prompt, decode, padded};
  step.block_tables = {{7}, {2, 9}, {}};
  KvPool pool;
  pool.blocks = 10;
  pool.block = 4;
  std::mt19937_64 rng(1);
  const EngineStepPlan p = plan_engine_step(step, pool, 8, 100, rng);
  CHECK(p.shape.q_len == std::vector<int64_t>{1, 1, 3});
  CHECK(p.shape.kv_len == std::vector<int64_t>{6, 3, 3});
  CHECK(input(p, engine_input::positions) == std::vector<int32_t>{5, 2, 0, 1, 2});
  // Decode at position 5: page 9 row 1 = 37; the padded one has no page (−1); the prompt page 7.
  CHECK(input(p, engine_input::slots) == std::vector<int32_t>{37, -1, 28, 29, 30});
  CHECK(input(p, engine_input::query_start) == std::vector<int32_t>{0, 1, 2, 5});
  CHECK(input(p, engine_input::sample_rows) == std::vector<int32_t>{0, 4});
  CHECK(input(p, engine_input::block_table).size() == 3 * 8);
  CHECK(p.shape.sampled == 2);
}

TEST_CASE("engine step plan: a decode-only step padded to its capture size") {
  EngineStep step;
  for (int64_t i = 0; i < 3; ++i) {
    SeqWork d;
    d.request = i, d.tokens = 1, d.position = 4 + i;
    step.seqs.push_back(d);
    step.block_tables.push_back({i, 5 + i});
  }
  KvPool pool;
  pool.blocks = 10;
  pool.block = 4;
  std::mt19937_64 rng(1);
  const EngineStepPlan p = plan_graphed_step(step, pool, 8, 100, rng, 4, 32);
  CHECK(p.shape.q_len == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(p.shape.kv_len == std::vector<int64_t>{32, 32, 32, 32});
  CHECK(p.shape.sampled == 4);
  CHECK(input(p, engine_input::kv_len) == std::vector<int32_t>{5, 6, 7, 2});
  CHECK(input(p, engine_input::slots) == std::vector<int32_t>{20, 25, 30, -1});
  CHECK(input(p, engine_input::sample_rows) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(input(p, engine_input::query_start) == std::vector<int32_t>{0, 1, 2, 3, 4});
  // One graph for the bucket: the step builds whatever the real contexts are.
  CHECK(build_engine_step(test_models::tiny_llama(), p.shape).ops.size() > 0);
}
