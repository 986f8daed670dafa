// The CPU backend on graphs from the builders and passes: measured memory follows the
// memory model exactly for fp32 graphs, and graph passes that must not change results
// (flash attention, fusion, fused optimizer, recompute) give the same values as the
// baseline when executed; a paged decode step reads and writes its pages through the table; a
// decode step over an fp8 KV cache (contiguous or paged) stores and reads e4m3 rows in the
// memory model's bytes. Tiny models keep this fast.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "cpu_test_util.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::cpu::test;

namespace {

ModelConfig small(ModelConfig m) {
  m.layers = 2;
  m.hidden = 32;
  m.ffn_hidden = 64;
  m.vocab = 50;
  m.max_seq = 64;
  return m;
}

Workload train_workload() {
  Workload w;
  w.phase = Phase::train;
  w.batch = 2;
  w.seq = 8;
  return w;
}

Graph graph_with(const ModelConfig& m, const Workload& w, std::vector<std::string> passes) {
  std::vector<StackStep> stack{{"step", {}}};
  for (auto& p : passes) stack[0].passes.push_back(PassSpec{std::move(p), std::nullopt});
  return build_stack_graph(m, w, stack, 0);
}

// Tensor ids by name, for the tensors of `role` (and the loss).
std::map<std::string, int> named(const Graph& g, TensorRole role) {
  std::map<std::string, int> out;
  for (const Tensor& t : g.tensors)
    if (t.role == role) out[t.name] = t.id;
  return out;
}

// Runs both graphs from the same initial values and compares every tensor of `role`
// present in both, by name.
void check_same_values(const Graph& base, const Graph& other, TensorRole role, double tol) {
  const auto a = named(base, role), b = named(other, role);
  std::vector<int> ids_a, ids_b;
  std::vector<std::string> names;
  for (const auto& [name, id] : a)
    if (auto it = b.find(name); it != b.end()) {
      ids_a.push_back(id);
      ids_b.push_back(it->second);
      names.push_back(name);
    }
  REQUIRE(!names.empty());
  cpu::CpuBackend be;
  const auto va = be.evaluate(base, 5, ids_a);
  const auto vb = be.evaluate(other, 5, ids_b);
  for (std::size_t i = 0; i < names.size(); ++i) {
    CAPTURE(names[i]);
    CHECK(rel_err(vb[i], va[i]) < tol);
  }
}

RunOptions once() {
  RunOptions o;
  o.warmup = 0;
  o.repeats = 1;
  return o;
}

// Prefill and decode of 2 sequences (and decode recomputing its context), and a training step.
std::vector<Workload> every_phase(bool with_no_cache) {
  Workload prefill;
  prefill.phase = Phase::prefill;
  prefill.batch = 2, prefill.prompt = 6, prefill.new_tokens = 4;
  Workload decode = prefill;
  decode.phase = Phase::decode;
  Workload no_cache = decode;
  no_cache.kv_cache = false;
  std::vector<Workload> out{prefill, decode, train_workload()};
  if (with_no_cache) out.push_back(no_cache);
  return out;
}

// Runs g once on the CPU backend: its measured peak is `pred`'s, role by role.
void check_peak(const Graph& g, const MemoryBreakdown& pred) {
  const Measurement meas = cpu::CpuBackend().run(g, once());
  CHECK(meas.peak_bytes == pred.peak);
  for (TensorRole r : all_tensor_roles) CHECK(meas.bytes_by_role_at_peak.at(r) == pred.by_role.at(r));
}

}  // namespace

TEST_CASE("cpu backend graphs: fp32 peaks equal the memory model's for every phase") {
  for (const ModelConfig& m : {small(test_models::tiny_llama()), small(test_models::tiny_gpt())}) {
    CAPTURE(m.name);
    for (const Workload& w : every_phase(true)) {
      CAPTURE(name_of(w.phase));
      CAPTURE(w.kv_cache);
      for (const char* pass : {"fp32", "flash_attention", "fusion"}) {
        CAPTURE(pass);
        const Graph g = graph_with(m, w, {pass});
        check_peak(g, predict_memory(g, false));
      }
    }
  }
}

TEST_CASE("cpu backend graphs: quantized weights execute, their peaks the memory model's, scratch included") {
  // Prefill (rows above the fused path's 8: the weight dequantized into scratch) and decode of
  // 2 sequences (fused), in int8, int4 (groups of 16) and W8A8.
  Hardware cpu;
  cpu.kind = "cpu";
  const ModelConfig m = small(test_models::tiny_llama());
  for (const Workload& w : every_phase(false)) {
    if (w.phase == Phase::train) continue;
    CAPTURE(name_of(w.phase));
    for (const PassSpec& quant : {PassSpec{"int8_weights", std::nullopt}, PassSpec{"int4_weights", 16.0},
                                  PassSpec{"w8a8", std::nullopt}}) {
      CAPTURE(quant.name);
      std::vector<StackStep> stack{{"step", {PassSpec{"bf16", std::nullopt}, quant}}};
      const Graph g = build_stack_graph(m, w, stack, 0);
      check_peak(g, predict_memory(g, cpu, false));
    }
  }
}

TEST_CASE("cpu backend graphs: 16-bit peaks equal the memory model's with a CPU profile, scratch included") {
  // bf16 GEMMs convert fp32 panels, and ops with an fp32 operand (the loss, LSE) stage converted
  // copies: the CPU profile plans both as workspace, byte for byte.
  Hardware cpu;
  cpu.kind = "cpu";
  for (const ModelConfig& m : {small(test_models::tiny_llama()), small(test_models::tiny_gpt())}) {
    CAPTURE(m.name);
    for (const Workload& w : every_phase(false)) {
      CAPTURE(name_of(w.phase));
      for (const std::vector<std::string>& passes :
           {std::vector<std::string>{"bf16"}, {"bf16", "flash_attention", "fusion"}, {"fp16", "flash_attention"}}) {
        CAPTURE(passes.back());
        const Graph g = graph_with(m, w, passes);
        check_peak(g, predict_memory(g, cpu, false));
      }
    }
  }
}

TEST_CASE("cpu backend graphs: flash attention leaves gradients unchanged") {
  for (const ModelConfig& m : {small(test_models::tiny_llama()), small(test_models::tiny_gpt())}) {
    CAPTURE(m.name);
    const Workload w = train_workload();
    check_same_values(graph_with(m, w, {}), graph_with(m, w, {"flash_attention"}), TensorRole::gradient, 1e-4);
  }
}

TEST_CASE("cpu backend graphs: fusion, fused optimizer and recompute leave the step unchanged") {
  const ModelConfig m = small(test_models::tiny_llama());
  const Workload w = train_workload();
  const Graph base = graph_with(m, w, {});
  check_same_values(base, graph_with(m, w, {"fusion"}), TensorRole::gradient, 1e-5);
  check_same_values(base, graph_with(m, w, {"recompute"}), TensorRole::gradient, 1e-6);
  // Weights after the AdamW step: one fused sweep or four separate ones agree exactly.
  check_same_values(base, graph_with(m, w, {"fused_optimizer"}), TensorRole::weight, 1e-7);
}

TEST_CASE("cpu backend graphs: bf16 mixed-precision training runs and stays close to fp32") {
  const ModelConfig m = small(test_models::tiny_gpt());
  const Workload w = train_workload();
  const Graph g = graph_with(m, w, {"bf16", "flash_attention", "fused_optimizer"});
  const Measurement meas = cpu::CpuBackend().run(g, once());
  // The GEMM workspace sits on top of the schedule; never below it.
  CHECK(meas.peak_bytes >= predict_memory(g, false).peak);
  // Gradients in bf16 track the fp32 ones to bf16 accuracy.
  check_same_values(graph_with(m, w, {"flash_attention"}), g, TensorRole::gradient, 5e-2);
}

TEST_CASE("cpu backend graphs: a paged decode step appends into its pages and attends through them") {
  const ModelConfig m = small(test_models::tiny_llama());  // 2 kv heads of 8
  Workload w;
  w.phase = Phase::decode;
  w.batch = 3, w.prompt = 20, w.new_tokens = 8;  // step at position 24, 25 rows attended
  std::vector<StackStep> stack{{"step", {{"flash_attention", std::nullopt}, {"paged_kv", 4.0}}}};
  const Graph g = build_stack_graph(m, w, stack, 0);
  auto id = [&](const std::string& name) {
    for (const Tensor& t : g.tensors)
      if (t.name == name) return t.id;
    FAIL("no tensor " << name);
    return -1;
  };
  const std::vector<int> ids{id("kv_block_table"), id("layer0.attn.k_cache"), id("layer0.attn.v_cache"),
                             id("layer0.attn.rope_q.out"), id("layer0.attn.rope_k.out"), id("layer0.attn.v_proj.out"),
                             id("layer0.attn.context.out")};
  const auto v = cpu::CpuBackend().evaluate(g, 5, ids);
  const auto& table_f = v[0];
  const auto &k_pages = v[1], &v_pages = v[2], &q = v[3], &k_new = v[4], &v_new = v[5], &o = v[6];
  cpu::PagedLayout p;
  p.block = 4, p.max_blocks = 7, p.num_blocks = 21;  // ceil(25 / 4) = 7 pages per sequence
  REQUIRE(table_f.size() == 21u);
  std::vector<int32_t> table(table_f.begin(), table_f.end());
  std::vector<int32_t> sorted = table;
  std::sort(sorted.begin(), sorted.end());
  for (int32_t i = 0; i < 21; ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);  // each page once

  cpu::AttnShape a;
  a.batch = 3, a.seq_q = 1, a.seq_kv = 25, a.heads = 4, a.kv_heads = 2, a.head_dim = 8;
  a.kv_capacity = 25, a.causal = true;
  const int64_t row = 16;
  // Gather the pages into a contiguous cache; the appended row (position 24) is this step's K/V.
  std::vector<float> k_flat(static_cast<std::size_t>(3 * 25 * row)), v_flat(k_flat.size());
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t j = 0; j < 25; ++j) {
      const int64_t r = cpu::paged_row(table.data(), p, b, j);
      for (int64_t x = 0; x < row; ++x) {
        k_flat[static_cast<std::size_t>((b * 25 + j) * row + x)] = k_pages[static_cast<std::size_t>(r * row + x)];
        v_flat[static_cast<std::size_t>((b * 25 + j) * row + x)] = v_pages[static_cast<std::size_t>(r * row + x)];
      }
      if (j == 24)
        for (int64_t x = 0; x < row; ++x) {
          CHECK(k_flat[static_cast<std::size_t>((b * 25 + j) * row + x)] == k_new[static_cast<std::size_t>(b * row + x)]);
          CHECK(v_flat[static_cast<std::size_t>((b * 25 + j) * row + x)] == v_new[static_cast<std::size_t>(b * row + x)]);
        }
    }
  std::vector<float> want(o.size()), lse(static_cast<std::size_t>(3 * 4));
  cpu::flash_attention(q.data(), k_flat.data(), v_flat.data(), want.data(), lse.data(), a);
  CHECK(rel_err(o, want) < 1e-6);

  // Measured memory still follows the memory model, the pages and the table included.
  const Measurement meas = cpu::CpuBackend().run(g, once());
  CHECK(meas.peak_bytes == predict_memory(g, false).peak);
}

TEST_CASE("cpu backend graphs: selective recompute leaves gradients unchanged") {
  // The rerun attention core reads the same Q, K and V: P, and so every gradient, is the same.
  for (const ModelConfig& m : {small(test_models::tiny_llama()), small(test_models::tiny_gpt())}) {
    CAPTURE(m.name);
    const Workload w = train_workload();
    const Graph base = graph_with(m, w, {});
    std::vector<StackStep> stack{{"step", {PassSpec{"recompute", std::nullopt, "selective"}}}};
    const Graph selective = build_stack_graph(m, w, stack, 0);
    int reruns = 0;
    for (const Op& op : selective.ops) reruns += op.recomputed;
    REQUIRE(reruns == 6);  // scores, softmax and context of 2 layers
    check_same_values(base, selective, TensorRole::gradient, 1e-6);
    // With fusion on top, then full recompute taking its place, still the same step.
    stack[0].passes.push_back(PassSpec{"fusion", std::nullopt});
    check_same_values(base, build_stack_graph(m, w, stack, 0), TensorRole::gradient, 1e-5);
    stack[0].passes.push_back(PassSpec{"recompute", std::nullopt});
    check_same_values(base, build_stack_graph(m, w, stack, 0), TensorRole::gradient, 1e-5);
  }
}

TEST_CASE("cpu backend graphs: ALiBi trains the same through materialized and flash attention") {
  // Both paths add the bias, the softmax to S and flash attention to its tiles (forward and
  // backward): gradients must agree as they do without ALiBi (test_cpu_attention.cpp checks the
  // bias itself against a naive attention).
  ModelConfig m = small(test_models::tiny_gpt());
  m.alibi = true;
  const Workload w = train_workload();
  const Graph base = graph_with(m, w, {});
  check_same_values(base, graph_with(m, w, {"flash_attention"}), TensorRole::gradient, 1e-4);
  check_same_values(base, graph_with(m, w, {"recompute"}), TensorRole::gradient, 1e-6);
  // Memory as the model predicts it: no position table, nothing else held for the bias.
  check_peak(base, predict_memory(base, false));
}

TEST_CASE("cpu backend graphs: ALiBi on a tensor-parallel rank is declined, naming why") {
  // The rank's kernels would give its heads the slopes of heads 0.. rather than its own.
  ModelConfig m = small(test_models::tiny_gpt());
  m.alibi = true;
  BuildOptions o{1};
  o.parallel.tp = 2;
  const Graph g = build_graph(m, train_workload(), o);
  const cpu::CpuBackend be;
  std::string why;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::attn_softmax) why = be.unsupported_reason(op, g);
  CHECK(why == "cpu backend: ALiBi attention 'layer0.attn.softmax' holds 2 of 4 heads (a tensor-parallel rank); its "
               "slopes are not placed yet");
}

namespace {

// A decode step of `stack`'s last step, by name.
Graph decode_step(const ModelConfig& m, const std::vector<StackStep>& stack) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 3, w.prompt = 20, w.new_tokens = 8;  // step at position 24, 25 rows attended
  return build_stack_graph(m, w, stack, stack.size() - 1);
}

const Op& op_touching(const Graph& g, int id, std::initializer_list<OpKind> kinds) {
  for (const Op& op : g.ops)
    if (std::find(kinds.begin(), kinds.end(), op.kind) != kinds.end())
      for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
        if (std::find(ids->begin(), ids->end(), id) != ids->end()) return op;
  FAIL("no op of the kinds asked for touches " << g.tensor(id).name);
  return g.ops.front();
}

}  // namespace

TEST_CASE("cpu backend graphs: a decode step over an fp8 KV cache, contiguous or paged, runs in the predicted bytes") {
  const ModelConfig m = small(test_models::tiny_llama());  // 4 heads on 2 kv heads of 8
  const std::vector<StackStep> flat{{"bf16", {{"bf16", std::nullopt}}},
                                    {"+flash", {{"flash_attention", std::nullopt}}},
                                    {"+fp8_kv", {{"fp8_kv", std::nullopt}}}};
  std::vector<StackStep> paged = flat;
  paged.insert(paged.begin() + 2, StackStep{"+paged", {{"paged_kv", 4.0}}});
  Hardware cpu_hw;
  cpu_hw.kind = "cpu";
  for (const bool is_paged : {false, true}) {
    CAPTURE(is_paged);
    const Graph g = decode_step(m, is_paged ? paged : flat);
    cpu::CpuBackend be;
    CHECK(graph_unsupported_reason(be, g) == "");
    int fp8 = 0;
    for (const Tensor& t : g.tensors) {
      CHECK((t.dtype == DType::fp8) == (t.role == TensorRole::kv_cache));
      fp8 += t.dtype == DType::fp8;
    }
    CHECK(fp8 == 4);  // K and V of two layers

    // Values: the new rows are stored as e4m3(k_new), the context attends over the cache as stored.
    const int k_cache = g.find_tensor("layer0.attn.k_cache"), v_cache = g.find_tensor("layer0.attn.v_cache");
    const int q = g.find_tensor("layer0.attn.rope_q.out"), k_new = g.find_tensor("layer0.attn.rope_k.out");
    const int v_new = g.find_tensor("layer0.attn.v_proj.out"), context = g.find_tensor("layer0.attn.context.out");
    const int table_id = is_paged ? g.find_tensor("kv_block_table") : -1;
    for (int id : {k_cache, v_cache, q, k_new, v_new, context}) REQUIRE(id >= 0);
    std::vector<int> ids{k_cache, v_cache, q, k_new, v_new, context};
    if (is_paged) ids.push_back(table_id);
    const auto v = be.evaluate(g, 5, ids);
    const auto &kc = v[0], &vc = v[1], &qv = v[2], &kn = v[3], &vn = v[4], &o = v[5];
    std::vector<int32_t> table;
    if (is_paged) table.assign(v[6].begin(), v[6].end());
    // The cache starts as valid e4m3 values (N(0, 1) quantized), not whatever bytes were there.
    auto finite = [](float x) { return std::isfinite(x); };
    CHECK(std::all_of(kc.begin(), kc.end(), finite));
    CHECK(std::all_of(vc.begin(), vc.end(), finite));

    const Op& flash = op_touching(g, context, {OpKind::flash_attention, OpKind::paged_flash_attention});
    const cpu::AttnShape a = ops::attn_shape(flash, g);
    CHECK(a.kv.fp8);
    CHECK(a.kv.scale == 1.0f);
    const cpu::KvAppendShape s =
        ops::kv_append_shape(op_touching(g, k_cache, {OpKind::kv_append, OpKind::paged_kv_append}), g);
    REQUIRE(s.seq_new == 1);
    REQUIRE(s.position == 24);
    REQUIRE(a.seq_kv == 25);
    auto cache_row = [&](int64_t b, int64_t j) {
      return is_paged ? cpu::paged_row(table.data(), a.paged, b, j) : b * a.kv_capacity + j;
    };
    const int64_t row = a.kv_heads * a.head_dim;
    std::vector<float> k_flat(static_cast<std::size_t>(a.batch * a.seq_kv * row)), v_flat(k_flat.size());
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t j = 0; j < a.seq_kv; ++j)
        for (int64_t x = 0; x < row; ++x) {
          const auto flat_at = static_cast<std::size_t>((b * a.seq_kv + j) * row + x);
          const auto cache_at = static_cast<std::size_t>(cache_row(b, j) * row + x);
          k_flat[flat_at] = kc[cache_at];
          v_flat[flat_at] = vc[cache_at];
          if (j == s.position) {
            const auto new_at = static_cast<std::size_t>(b * row + x);
            CHECK(kc[cache_at] == cpu::to_f32(cpu::fp8_e4m3(kn[new_at])));
            CHECK(vc[cache_at] == cpu::to_f32(cpu::fp8_e4m3(vn[new_at])));
          }
        }
    cpu::AttnShape dense = a;
    dense.kv = {};
    dense.paged = {};
    dense.kv_capacity = a.seq_kv;
    std::vector<float> want(o.size()), lse(static_cast<std::size_t>(a.batch * a.heads));
    cpu::flash_attention(qv.data(), k_flat.data(), v_flat.data(), want.data(), lse.data(), dense);
    CHECK(rel_err(o, want) < 1e-2);  // O is stored in bf16

    // Memory as the CPU profile predicts it: the cache at one byte an element, no staged copy of it.
    check_peak(g, predict_memory(g, cpu_hw, false));
  }
}

TEST_CASE("cpu backend graphs: fp8 is accepted only as the KV cache of the kinds that read and write one") {
  const ModelConfig m = small(test_models::tiny_llama());
  const std::vector<StackStep> stack{{"bf16", {{"bf16", std::nullopt}}},
                                     {"+flash", {{"flash_attention", std::nullopt}}},
                                     {"+fp8_kv", {{"fp8_kv", std::nullopt}}}};
  const Graph g = decode_step(m, stack);
  const cpu::CpuBackend be;
  const int k_cache = g.find_tensor("layer0.attn.k_cache");
  const Op& append = op_touching(g, k_cache, {OpKind::kv_append});
  CHECK(be.unsupported_reason(append, g) == "");
  // New rows in fp8: the append takes them in the op's float type only.
  Graph other = g;
  other.tensor(append.inputs[0]).dtype = DType::fp8;
  CHECK(be.unsupported_reason(append, other) == "cpu backend has no fp8 kv_append kernel");
  // An fp8 tensor that is not a KV cache.
  other = g;
  other.tensor(k_cache).role = TensorRole::activation;
  CHECK(be.unsupported_reason(append, other) == "cpu backend has no fp8 kv_append kernel");
  // A kind without an fp8 path reading the cache.
  Op scores = append;
  scores.kind = OpKind::attn_scores;
  CHECK(be.unsupported_reason(scores, g) == "cpu backend has no fp8 attn_scores kernel");
  // fp8 weights still need an fp8 GEMM.
  other = g;
  for (const Op& op : other.ops)
    if (op.kind == OpKind::gemm) {
      other.tensor(op.inputs[1]).dtype = DType::fp8;
      CHECK(be.unsupported_reason(op, other) == "cpu backend has no fp8 GEMM");
      CHECK_THROWS_AS((void)cpu::CpuBackend().run(other, once()), NotExecutable);
      break;
    }
}
