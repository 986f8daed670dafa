// The paged and varlen op kinds end to end: the builders and passes make them, the cost model
// prices them as their dense kind's paged curves say, the CPU backend executes them; a dense
// kind carrying a page size is refused with the op named.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_graph_runner.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;

namespace {

ModelConfig small_llama() {
  ModelConfig m = test_models::tiny_llama();  // 4 heads of 16 on 2 KV heads
  m.layers = 2;
  return m;
}

Workload decode_step() {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 2, w.prompt = 20, w.new_tokens = 8;
  return w;
}

Graph decode_graph(bool paged) {
  std::vector<StackStep> stack{{"step", {{"flash_attention", std::nullopt}}}};
  if (paged) stack[0].passes.push_back({"paged_kv", 4.0});
  return build_stack_graph(small_llama(), decode_step(), stack, 0);
}

int count(const Graph& g, OpKind k) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == k;
  return n;
}

const Op& first(const Graph& g, OpKind k) {
  for (const Op& op : g.ops)
    if (op.kind == k) return op;
  FAIL("no op of kind " << name_of(k));
  return g.ops.front();
}

RunOptions once() {
  RunOptions o;
  o.warmup = 0;
  o.repeats = 1;
  return o;
}

// A step of two sequences: a decode at position 6 (7 keys) over pages {2, 0}, and the first
// 5 tokens of a prompt over pages {3, 1}; 4-row pages in a pool of 6, both sampling.
std::pair<Graph, StepInputs> engine_step(const ModelConfig& m) {
  EngineStepShape sh;
  sh.kv_block = 4, sh.pool_blocks = 6, sh.table_width = 2;
  sh.q_len = {1, 5}, sh.kv_len = {7, 5}, sh.sampled = 2;
  const std::vector<int32_t> table{2, 0, 3, 1};
  std::vector<int32_t> ids, positions, slots;
  auto token = [&](int64_t seq, int32_t pos) {
    ids.push_back(static_cast<int32_t>((11 * ids.size() + 3) % static_cast<std::size_t>(m.vocab)));
    positions.push_back(pos);
    slots.push_back(table[static_cast<std::size_t>(seq * 2 + pos / 4)] * 4 + pos % 4);
  };
  token(0, 6);
  for (int32_t p = 0; p < 5; ++p) token(1, p);
  StepInputs in{{engine_input::tokens, ids},          {engine_input::positions, positions},
                {engine_input::slots, slots},         {engine_input::block_table, table},
                {engine_input::query_start, {0, 1, 6}}, {engine_input::kv_len, {7, 5}},
                {engine_input::sample_rows, {0, 5}}};
  return {build_engine_step(m, sh), in};
}

}  // namespace

TEST_CASE("cpu op kinds: paged_kv makes paged_flash_attention and paged_kv_append, priced and executed") {
  const Graph flat = decode_graph(false), g = decode_graph(true);
  CHECK(count(g, OpKind::paged_flash_attention) == 2);
  CHECK(count(g, OpKind::paged_kv_append) == 4);
  CHECK(count(g, OpKind::flash_attention) == 0);
  CHECK(count(g, OpKind::kv_append) == 0);

  // The same work as the contiguous kinds, plus the table: one entry per appended row, the
  // attention's whole table.
  const Op& fa = first(g, OpKind::paged_flash_attention);
  const Op& fa_flat = first(flat, OpKind::flash_attention);
  CHECK(op_flops(fa, g) == op_flops(fa_flat, flat));
  const double table_bytes = g.tensor(fa.inputs.back()).bytes();
  CHECK(table_bytes == 2 * 7 * 4);  // 2 sequences, ceil(28 / 4) pages, int32
  CHECK(op_bytes(fa, g) == op_bytes(fa_flat, flat) + table_bytes);
  const Op& ap = first(g, OpKind::paged_kv_append);
  CHECK(op_bytes(ap, g) == op_bytes(first(flat, OpKind::kv_append), flat) + 2 * 1 * 4);

  // Priced through the dense kinds' paged curves.
  const Hardware hw = test_models::h100_node();
  const Prediction p = predict(g, hw);
  for (const Op* op : {&fa, &ap}) {
    CAPTURE(op->name);
    const OpCost& c = p.ops[static_cast<std::size_t>(op->id)];
    CHECK(std::max(c.compute_time, c.memory_time) > 0);
    const CalibrationPoint cp = calibration_point(*op, c, hw);
    CHECK(cp.key == std::string(op == &fa ? "flash_attention" : "kv_append") + "/fp32/memory/paged");
  }

  // Executed: every op timed, the paged ones included.
  const Measurement m = cpu::CpuBackend().run(g, once());
  for (const Op& op : g.ops) {
    CAPTURE(op.name);
    CHECK(m.ops[static_cast<std::size_t>(op.id)].executed);
  }
}

TEST_CASE("cpu op kinds: an engine step's varlen kinds are priced and executed") {
  const ModelConfig m = small_llama();
  const auto [g, inputs] = engine_step(m);
  const int layers = static_cast<int>(m.layers);
  CHECK(count(g, OpKind::varlen_rope) == 2 * layers);  // Q and K
  CHECK(count(g, OpKind::varlen_kv_append) == 2 * layers);
  CHECK(count(g, OpKind::varlen_flash_attention) == layers);
  CHECK(count(g, OpKind::varlen_slice_last_token) == 1);
  for (OpKind dense : {OpKind::rope, OpKind::kv_append, OpKind::flash_attention, OpKind::slice_last_token})
    CHECK(count(g, dense) == 0);

  const Hardware hw = test_models::h100_node();
  const Prediction p = predict(g, hw);
  // The attention's bound depends on the step; its variant is "paged".
  const char* keys[] = {"rope/fp32/memory", "kv_append/fp32/memory/paged", "flash_attention/fp32/",
                        "slice_last_token/fp32/memory"};
  const OpKind kinds[] = {OpKind::varlen_rope, OpKind::varlen_kv_append, OpKind::varlen_flash_attention,
                          OpKind::varlen_slice_last_token};
  for (std::size_t i = 0; i < 4; ++i) {
    const Op& op = first(g, kinds[i]);
    CAPTURE(op.name);
    const OpCost& c = p.ops[static_cast<std::size_t>(op.id)];
    CHECK(std::max(c.compute_time, c.memory_time) > 0);
    const std::string key = calibration_point(op, c, hw).key;
    CHECK(key.starts_with(keys[i]));
    if (op.kind == OpKind::varlen_flash_attention) CHECK(key.ends_with("/paged"));
    CHECK_NOTHROW(ops::check_op(op, g));
  }

  // Executed with the step's metadata written: every op runs, the logits are finite.
  cpu::GraphRunner runner(g, 7);
  for (const auto& [name, values] : inputs) runner.write(g.find_tensor(name), values);
  std::vector<std::vector<double>> seconds(g.ops.size());
  const int logits = g.find_tensor("lm_head.out");
  REQUIRE(logits >= 0);
  std::vector<char> keep(g.tensors.size(), 0);
  keep[static_cast<std::size_t>(logits)] = 1;
  runner.run_once(&seconds, &keep);
  for (const Op& op : g.ops) {
    CAPTURE(op.name);
    CHECK(seconds[static_cast<std::size_t>(op.id)].size() == 1);
  }
  const std::vector<float> out = runner.read(logits);
  CHECK(out.size() == static_cast<std::size_t>(2 * m.vocab));
  for (float v : out) REQUIRE(std::isfinite(v));
}

TEST_CASE("cpu op kinds: a dense kind with a page size is refused, naming the op") {
  Graph g = decode_graph(true);
  Op* fa = nullptr;
  for (Op& op : g.ops)
    if (op.kind == OpKind::paged_flash_attention && fa == nullptr) fa = &op;
  REQUIRE(fa != nullptr);
  fa->kind = OpKind::flash_attention;  // still kv_block = 4
  fa->inputs.pop_back();               // the dense kind's {Q, K, V}
  const std::string why = "op 'layer0.attn.flash_attention' (flash_attention) has kv_block = 4, but flash_attention "
                          "reads no KV pages: a paged cache is read by paged_flash_attention (the paged_kv pass)";
  CHECK_THROWS_WITH_AS(ops::check_op(*fa, g), why.c_str(), NotExecutable);
  CHECK_THROWS_WITH_AS(g.check(), ("graph: " + why).c_str(), std::logic_error);
  CHECK_THROWS_WITH(cpu::CpuBackend().run(g, once()), doctest::Contains(why.c_str()));
}
