// Graph builders: structure, shapes, counts under layer sampling, and agreement with the
// closed-form formulas (KV cache bytes, Megatron training FLOPs, weight bytes).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/formulas.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

Workload decode(int64_t batch, int64_t prompt, int64_t new_tokens) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = batch, w.prompt = prompt, w.new_tokens = new_tokens;
  return w;
}

Workload train(int64_t batch, int64_t seq) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch, w.seq = seq;
  return w;
}

const Op& op_named(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return g.ops.front();
}

bool has_tensor(const Graph& g, const std::string& name) {
  for (const Tensor& t : g.tensors)
    if (t.name == name) return true;
  return false;
}

double role_bytes(const Graph& g, TensorRole r) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == r) b += t.bytes() * t.count;
  return b;
}

int count_kind(const Graph& g, OpKind k) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == k;
  return n;
}

}  // namespace

TEST_CASE("builders: decode step with a KV cache (Llama style)") {
  const ModelConfig m = tiny_llama();  // 4 layers, h 64, 4 heads, 2 KV heads, head_dim 16
  const Graph g = build_graph(m, decode(3, 20, 10), {});
  const int64_t context = 25;  // 20 + 10/2
  CHECK(g.layers_total == 4);
  CHECK(g.layers_built == 4);
  const Op& q = op_named(g, "layer0.attn.q_proj");
  CHECK(q.kind == OpKind::gemm);
  CHECK(q.attrs.m == 3);
  CHECK(q.attrs.n == 64);
  CHECK(q.stage == Stage::forward);
  CHECK(q.dtype == DType::fp32);
  CHECK(q.layer == 0);
  const Op& s = op_named(g, "layer2.attn.scores");
  CHECK(s.attrs.seq_q == 1);
  CHECK(s.attrs.seq_kv == context + 1);
  CHECK(s.attrs.kv_capacity == 30);
  CHECK(s.attrs.causal);
  CHECK(g.tensor(s.inputs[1]).role == TensorRole::kv_cache);
  CHECK(g.tensor(s.inputs[1]).shape == std::vector<int64_t>{3, 30, 2, 16});
  const Op& app = op_named(g, "layer1.attn.k_append");
  CHECK(app.attrs.position == context);
  CHECK(app.inputs[1] == app.outputs[0]);
  CHECK(op_named(g, "layer0.attn.rope_q").attrs.position == context);
  CHECK(op_named(g, "lm_head").attrs.m == 3);
  CHECK(op_named(g, "lm_head").attrs.n == 100);
  CHECK(count_kind(g, OpKind::slice_last_token) == 0);
  CHECK(count_kind(g, OpKind::kv_append) == 8);
  CHECK(g.tensor(op_named(g, "embedding").inputs[0]).dtype == DType::int32);
  // Weights of an untied model without biases add up to params() in fp32.
  CHECK(role_bytes(g, TensorRole::weight) == 4.0 * static_cast<double>(m.params()));
}

TEST_CASE("builders: a speculative decode step is one verify pass of k + 1 rows per sequence") {
  const ModelConfig m = tiny_llama();
  Workload w = decode(3, 20, 10);
  w.draft_tokens = 4;
  w.acceptance = 0.7;
  const Graph g = build_graph(m, w, {});
  const int64_t context = 25, rows = 5;  // the last accepted token and 4 drafts
  // The rows attend the cache and each other causally, after the context.
  const Op& s = op_named(g, "layer2.attn.scores");
  CHECK(s.attrs.seq_q == rows);
  CHECK(s.attrs.seq_kv == context + rows);
  CHECK(s.attrs.causal);
  CHECK(s.attrs.kv_capacity == 20 + 10 + 4);  // room for a step's drafts past the generation
  CHECK(op_named(g, "layer1.attn.k_append").attrs.position == context);
  CHECK(op_named(g, "layer0.attn.q_proj").attrs.m == 3 * rows);
  // Logits for every row (each draft is checked), no slice of the last one.
  CHECK(op_named(g, "lm_head").attrs.m == 3 * rows);
  CHECK(count_kind(g, OpKind::slice_last_token) == 0);
  // Its yield: 3 sequences × (1 − 0.7^5) / (1 − 0.7) = 3 × 2.7731 tokens.
  CHECK(g.workload.tokens_per_step() == approx(3 * 2.7731).epsilon(1e-4));
  // A model that learns its positions needs the drafts' positions in its table.
  const ModelConfig gpt = tiny_gpt();
  w.prompt = gpt.max_seq - 10;
  CHECK_NOTHROW((void)build_graph(gpt, decode(3, gpt.max_seq - 10, 10), {}));
  CHECK_THROWS_AS((void)build_graph(gpt, w, {}), ConfigError);
}

TEST_CASE("builders: decode without a KV cache recomputes the context") {
  Workload w = decode(2, 20, 10);
  w.kv_cache = false;
  const Graph g = build_graph(tiny_gpt(), w, {});
  const Op& s = op_named(g, "layer0.attn.scores");
  CHECK(s.attrs.seq_q == 26);
  CHECK(s.attrs.seq_kv == 26);
  CHECK(role_bytes(g, TensorRole::kv_cache) == 0);
  CHECK(op_named(g, "slice_last_token").attrs.rows == 52);
  CHECK(op_named(g, "lm_head").attrs.m == 2);
  CHECK(op_named(g, "embedding").inputs.size() == 3);  // learned positions
  CHECK(op_named(g, "lm_head").attrs.trans_b);         // tied: reads the embedding table
}

TEST_CASE("builders: prefill fills a cache sized for the whole generation") {
  const Graph g = build_graph(tiny_llama(), [] {
    Workload w = decode(2, 16, 8);
    w.phase = Phase::prefill;
    return w;
  }(), {});
  const Op& s = op_named(g, "layer3.attn.scores");
  CHECK(s.attrs.seq_q == 16);
  CHECK(s.attrs.seq_kv == 16);
  CHECK(s.attrs.kv_capacity == 16);
  CHECK(g.tensor(s.inputs[1]).role == TensorRole::activation);  // fresh K
  const Op& app = op_named(g, "layer3.attn.v_append");
  CHECK(app.attrs.kv_capacity == 24);
  CHECK(app.attrs.seq_q == 16);
  CHECK(g.tensor(app.outputs[0]).shape == std::vector<int64_t>{2, 24, 2, 16});
  CHECK(op_named(g, "lm_head").attrs.m == 2);
  CHECK(count_kind(g, OpKind::slice_last_token) == 1);
}

TEST_CASE("builders: KV cache tensors add up to the formula (Llama-2-7B, 2048 tokens, bf16)") {
  const ModelConfig m = llama2_7b();
  const Workload w = decode(1, 1024, 1024);  // capacity 2048
  const Graph g = build_stack_graph(m, w, {{"bf16", {{"bf16", {}}}}}, 0, BuildOptions{2});
  CHECK(role_bytes(g, TensorRole::kv_cache) == 1073741824.0);
  CHECK(role_bytes(g, TensorRole::kv_cache) == formulas::kv_cache_bytes(m, 1, 2048, DType::bf16));
}

TEST_CASE("builders: layer sampling scales counts and keeps FLOPs") {
  const ModelConfig m = llama2_7b();
  const Workload w = decode(4, 512, 256);
  const Graph full = build_graph(m, w, {});
  const Graph two = build_graph(m, w, BuildOptions{2});
  CHECK(two.layers_built == 2);
  CHECK(two.layer_scale() == 16);
  CHECK(op_named(two, "layer1.mlp.down_proj").count == 16);
  CHECK(op_named(two, "lm_head").count == 1);
  for (const Tensor& t : two.tensors)
    if (t.role == TensorRole::weight && t.name.rfind("layer", 0) == 0) CHECK(t.count == 16);
  CHECK(full.ops.size() > 10 * two.ops.size());
  CHECK(std::abs(graph_flops(two) - graph_flops(full)) <= 1e-9 * graph_flops(full));

  const Graph t_full = build_graph(tiny_gpt(), train(2, 32), {});
  const Graph t_two = build_graph(tiny_gpt(), train(2, 32), BuildOptions{2});
  CHECK(std::abs(graph_flops(t_two) - graph_flops(t_full)) <= 1e-9 * graph_flops(t_full));
}

TEST_CASE("builders: training graph structure") {
  const ModelConfig m = tiny_llama();
  const Graph g = build_graph(m, train(2, 16), BuildOptions{2});
  int params = 0, grads = 0, states = 0;
  for (const Tensor& t : g.tensors) {
    params += t.role == TensorRole::weight;
    grads += t.role == TensorRole::gradient;
    states += t.role == TensorRole::optimizer_state;
  }
  CHECK(grads == params);
  CHECK(states == 2 * params);
  CHECK(count_kind(g, OpKind::adamw) == params);
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::adamw) continue;
    CHECK(op.attrs.passes == 4);
    CHECK(op.inputs.size() == 4);
    CHECK(op.stage == Stage::optimizer);
  }
  const Op& wgrad = op_named(g, "lm_head.wgrad");
  CHECK(g.tensor(wgrad.outputs[0]).role == TensorRole::gradient);
  CHECK(wgrad.attrs.trans_a);
  CHECK(wgrad.attrs.m == 64);
  CHECK(wgrad.attrs.n == 100);
  CHECK(wgrad.attrs.k == 32);
  const Op& dgrad = op_named(g, "layer0.attn.k_proj.dgrad");
  CHECK(dgrad.attrs.trans_b);
  CHECK(dgrad.attrs.n == 64);
  CHECK(dgrad.attrs.k == 32);  // kv_dim = 2 heads × 16
  CHECK(op_named(g, "layer1.attn.scores.bwd").stage == Stage::backward);
  CHECK(op_named(g, "layer0.attn.rope_k.bwd").kind == OpKind::rope_bwd);
  CHECK(op_named(g, "embedding.bwd").kind == OpKind::embedding_bwd);
  const Op& ce = op_named(g, "cross_entropy");
  CHECK(g.tensor(ce.outputs[0]).dtype == DType::fp32);
  // Saved activations stand for every layer, transient ones for one.
  CHECK(g.tensor(op_named(g, "layer0.attn.softmax").outputs[0]).count == 2);  // P, saved
  CHECK(g.tensor(op_named(g, "layer0.attn.scores").outputs[0]).count == 1);   // S, transient
  CHECK(g.tensor(op_named(g, "layer1.mlp.down_proj.dgrad").outputs[0]).count == 1);
  CHECK(g.tensor(op_named(g, "embedding").outputs[0]).count == 1);
  // Backward runs the layers in reverse.
  CHECK(op_named(g, "layer1.mlp.down_proj.dgrad").id < op_named(g, "layer0.mlp.down_proj.dgrad").id);
}

TEST_CASE("builders: grad_accum multiplies forward/backward counts, not the optimizer") {
  Workload w = train(2, 16);
  w.grad_accum = 4;
  const Graph g = build_graph(tiny_llama(), w, BuildOptions{2});
  CHECK(op_named(g, "layer0.attn.q_proj").count == 8);  // 4 micro-batches × 2 layers each
  CHECK(op_named(g, "lm_head.wgrad").count == 4);
  CHECK(op_named(g, "lm_head.wgrad").attrs.accumulate);
  CHECK(op_named(g, "lm_head.wgrad").inputs.size() == 3);
  CHECK(op_named(g, "lm_head.weight.adamw").count == 1);
  CHECK(op_named(g, "layer0.attn.q_proj.weight.adamw").count == 2);
}

TEST_CASE("builders: training FLOPs agree with Megatron's formula (GPT-2 medium dims)") {
  const ModelConfig m = gpt2_medium();
  const Graph g = build_graph(m, train(4, 1024), BuildOptions{2});
  CHECK(graph_flops(g) ==
        approx(formulas::megatron_train_flops(m, 4, 1024, false)).epsilon(0.02));
}

TEST_CASE("builders: static training bytes per parameter match the formula") {
  const ModelConfig m = tiny_llama();  // no biases: the graph holds every parameter
  auto static_bytes = [](const Graph& g) {
    return role_bytes(g, TensorRole::weight) + role_bytes(g, TensorRole::master_weight) +
           role_bytes(g, TensorRole::gradient) + role_bytes(g, TensorRole::optimizer_state);
  };
  const double p = static_cast<double>(m.params());
  const Graph fp32 = build_graph(m, train(1, 16), BuildOptions{2});
  CHECK(static_bytes(fp32) / p == formulas::train_static_bytes_per_param(DType::fp32, false));
  const Graph bf16 = build_stack_graph(m, train(1, 16), {{"bf16", {{"bf16", {}}}}}, 0, BuildOptions{2});
  CHECK(static_bytes(bf16) / p == formulas::train_static_bytes_per_param(DType::bf16, true));
}

TEST_CASE("builders: inputs that cannot be built are configuration errors") {
  CHECK_THROWS_AS((void)build_graph(tiny_gpt(), train(1, 512), {}), ConfigError);  // max_seq 256
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), decode(0, 8, 8), {}), ConfigError);
  ModelConfig bad = tiny_llama();
  bad.heads = 5;
  CHECK_THROWS_AS((void)build_graph(bad, decode(1, 8, 8), {}), ConfigError);
}

TEST_CASE("builders: saved activations match Korthikanti et al. 2022 without dropout") {
  // Korthikanti et al. 2022, §4.1: a GPT layer saves s·b·h·(34 + 5·a·s/h) bytes in 16-bit,
  // of which 2·sbh (dropout masks) and 3·a·s²·b (attention dropout mask and output) belong to
  // dropout, which these graphs do not have: s·b·h·(32 + 2·a·s/h) remain. GPT-2 medium dims
  // (h 1024, a 16, 24 layers), b 1, s 1024: sbh = 1,048,576; 32 + 2·16 = 64 -> 64 MiB a layer.
  const ModelConfig m = gpt2_medium();
  auto saved = [](const Graph& g) {
    double b = 0;  // activations standing for every layer (count L/built > 1)
    for (const Tensor& t : g.tensors)
      if (t.role == TensorRole::activation && t.count > 1) b += t.bytes() * t.count;
    return b;
  };
  const Graph g = build_stack_graph(m, train(1, 1024), {{"bf16", {{"bf16", {}}}}}, 0, BuildOptions{2});
  CHECK(saved(g) == 24.0 * 64 * 1048576);
  // Full recompute keeps only each layer's output (the next layer's input): 2·sbh a layer.
  const Graph r = build_stack_graph(m, train(1, 1024),
                                    {{"bf16", {{"bf16", {}}}}, {"recompute", {{"recompute", {}}}}},
                                    1, BuildOptions{2});
  CHECK(saved(r) == 24.0 * 2 * 1048576);
}
