// Tensor (and sequence) parallel rank graphs: per-rank shapes, FLOPs and weights against the
// single-GPU graph, the collectives per layer against Megatron's volume (Shoeybi et al. 2019),
// saved activations against Korthikanti et al. 2022, every phase through every pass, and the
// default options leaving the graphs unchanged.
#include <doctest/doctest.h>

#include <string>
#include <vector>

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

Workload train(int64_t batch, int64_t seq) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch, w.seq = seq;
  return w;
}

Workload decode(int64_t batch, int64_t prompt, int64_t new_tokens) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = batch, w.prompt = prompt, w.new_tokens = new_tokens;
  return w;
}

Workload prefill(int64_t batch, int64_t prompt, int64_t new_tokens) {
  Workload w = decode(batch, prompt, new_tokens);
  w.phase = Phase::prefill;
  return w;
}

BuildOptions tp_options(int tp, bool sp, int64_t layers = 0) {
  BuildOptions o;
  o.layers = layers;
  o.parallel.tp = tp;
  o.parallel.sp = sp;
  return o;
}

const Op& op_named(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return g.ops.front();
}

bool has_op(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name) return true;
  return false;
}

bool is_norm_weight(const Tensor& t) { return t.name.find("norm.") != std::string::npos; }

// Weight bytes of the layers (every layer, through counts), with or without the norms.
double layer_weight_bytes(const Graph& g, bool norms) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::weight && t.name.rfind("layer", 0) == 0 && is_norm_weight(t) == norms)
      b += t.bytes() * t.count;
  return b;
}

double layer_gemm_flops(const Graph& g) {
  double f = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::gemm && op.layer >= 0) f += op_flops(op, g) * op.count;
  return f;
}

// The buffer a collective moves: its payload, else the largest tensor it touches.
double payload(const Graph& g, const Op& op) {
  if (op.attrs.payload_bytes > 0) return op.attrs.payload_bytes;
  double p = 0;
  for (int id : op.inputs) p = std::max(p, g.tensor(id).bytes());
  for (int id : op.outputs) p = std::max(p, g.tensor(id).bytes());
  return p;
}

// Bytes one rank sends in a ring collective (Patarasuk & Yuan 2009).
double sent_bytes(const Graph& g, const Op& op) {
  const double p = payload(g, op);
  return op.attrs.collective == Collective::all_reduce ? formulas::ring_allreduce_bytes(p, op.attrs.group)
                                                       : formulas::ring_allgather_bytes(p, op.attrs.group);
}

struct Collectives {
  int all_reduce = 0, all_gather = 0, reduce_scatter = 0, regather = 0;
  double bytes = 0;  // sent per rank, re-gathers left out
};

Collectives layer_collectives(const Graph& g, int layer, Stage stage) {
  Collectives c;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::collective || op.layer != layer || op.stage != stage) continue;
    if (op.name.find(".regather.") != std::string::npos) {
      ++c.regather;
      continue;
    }
    c.all_reduce += op.attrs.collective == Collective::all_reduce;
    c.all_gather += op.attrs.collective == Collective::all_gather;
    c.reduce_scatter += op.attrs.collective == Collective::reduce_scatter;
    c.bytes += sent_bytes(g, op);
  }
  return c;
}

// Activations standing for every layer (count L/built > 1): what the layers save for backward.
double saved_activation_bytes(const Graph& g) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::activation && t.count > 1) b += t.bytes() * t.count;
  return b;
}

// The tensor-parallel degrees up to 8 that split the model's heads and KV heads.
std::vector<int> degrees(const ModelConfig& m) {
  std::vector<int> out;
  for (int tp : {2, 4, 8})
    if (m.heads % tp == 0 && m.kv_heads_or_heads() % tp == 0) out.push_back(tp);
  return out;
}

Graph stack(const ModelConfig& m, const Workload& w, const std::vector<std::string>& names,
            const BuildOptions& o) {
  std::vector<StackStep> steps;
  for (const auto& n : names) steps.push_back({"+" + n, {{n, {}}}});
  return build_stack_graph(m, w, steps, steps.size() - 1, o);
}

}  // namespace

TEST_CASE("tensor parallel: default options build the single-GPU graph") {
  for (const Workload& w : {train(2, 16), decode(3, 20, 10), prefill(2, 16, 8)}) {
    const Graph a = build_graph(tiny_llama(), w, {});
    BuildOptions o;
    o.parallel = ParallelSpec{};
    o.parallel.tp = 1;
    o.parallel.pp = 1;
    o.stage = 0;
    const Graph b = build_graph(tiny_llama(), w, o);
    REQUIRE(a.ops.size() == b.ops.size());
    REQUIRE(a.tensors.size() == b.tensors.size());
    for (std::size_t i = 0; i < a.ops.size(); ++i) {
      CHECK(a.ops[i].name == b.ops[i].name);
      CHECK(a.ops[i].kind == b.ops[i].kind);
      CHECK(a.ops[i].inputs == b.ops[i].inputs);
      CHECK(a.ops[i].outputs == b.ops[i].outputs);
    }
    for (std::size_t i = 0; i < a.tensors.size(); ++i) {
      CHECK(a.tensors[i].name == b.tensors[i].name);
      CHECK(a.tensors[i].shape == b.tensors[i].shape);
    }
    for (const Op& op : a.ops) CHECK(op.kind != OpKind::collective);
    CHECK(a.layers_total == 4);
  }
}

TEST_CASE("tensor parallel: each rank holds its heads, MLP width and vocabulary slice") {
  const ModelConfig m = tiny_llama();  // h 64, 4 heads, 2 KV heads, head_dim 16, F 128, V 100
  const Graph g = build_graph(m, decode(3, 20, 10), tp_options(2, false));
  const Op& q = op_named(g, "layer0.attn.q_proj");
  CHECK(q.attrs.n == 32);  // 2 heads × 16
  CHECK(q.attrs.k == 64);
  CHECK(op_named(g, "layer0.attn.k_proj").attrs.n == 16);  // 1 KV head
  const Op& o = op_named(g, "layer0.attn.o_proj");
  CHECK(o.attrs.k == 32);
  CHECK(o.attrs.n == 64);
  const Op& s = op_named(g, "layer0.attn.scores");
  CHECK(s.attrs.heads == 2);
  CHECK(s.attrs.kv_heads == 1);
  CHECK(s.attrs.head_dim == 16);  // the model's head_dim, not hidden/(heads/tp)
  CHECK(g.tensor(s.inputs[1]).shape == std::vector<int64_t>{3, 30, 1, 16});  // KV cache, local heads
  CHECK(op_named(g, "layer0.mlp.down_proj").attrs.k == 64);  // F/tp
  CHECK(g.tensor(op_named(g, "embedding").inputs[1]).shape == std::vector<int64_t>{50, 64});
  CHECK(op_named(g, "lm_head").attrs.n == 50);
  // The logits are gathered for sampling.
  const Op& gather = op_named(g, "lm_head.all_gather");
  CHECK(gather.attrs.collective == Collective::all_gather);
  CHECK(g.tensor(gather.outputs[0]).shape == std::vector<int64_t>{3, 100});
  // The vocab-parallel embedding's partial rows are summed.
  CHECK(op_named(g, "embedding.all_reduce").attrs.group == 2);
  // Norms stay whole.
  CHECK(op_named(g, "layer0.attn_norm").attrs.cols == 64);
  CHECK(op_named(g, "layer0.attn_norm").attrs.rows == 3);
}

TEST_CASE("tensor parallel: per-rank layer GEMM FLOPs are the single GPU's / tp") {
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (const Workload& w : {train(2, 16), prefill(4, 16, 8), decode(4, 16, 8)}) {
      const Graph one = build_graph(m, w, {});
      for (int tp : degrees(m)) {
        for (bool sp : {false, true}) {
          CAPTURE(m.name);
          CAPTURE(tp);
          CAPTURE(sp);
          const Graph g = build_graph(m, w, tp_options(tp, sp));
          CHECK(layer_gemm_flops(g) * tp == approx(layer_gemm_flops(one)));
          // The head's GEMM too: the vocabulary (100, a multiple of 2 and 4) splits evenly.
          CHECK(op_flops(op_named(g, "lm_head"), g) * tp ==
                approx(op_flops(op_named(one, "lm_head"), one)));
        }
      }
    }
  }
}

TEST_CASE("tensor parallel: per-rank layer weights ×tp are the single GPU's, norms replicated") {
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt(), llama3_8b()}) {
    const Graph one = build_graph(m, train(1, 16), BuildOptions{1});
    for (int tp : degrees(m)) {
      CAPTURE(m.name);
      CAPTURE(tp);
      const Graph g = build_graph(m, train(1, 16), tp_options(tp, true, 1));
      CHECK(layer_weight_bytes(g, false) * tp == approx(layer_weight_bytes(one, false)));
      CHECK(layer_weight_bytes(g, true) == approx(layer_weight_bytes(one, true)));
      // Gradients and AdamW states follow their weights.
      double grads = 0, weights = 0;
      for (const Tensor& t : g.tensors) {
        if (t.role == TensorRole::gradient) grads += t.bytes() * t.count;
        if (t.role == TensorRole::weight) weights += t.bytes() * t.count;
      }
      CHECK(grads == approx(weights));
    }
  }
}

TEST_CASE("tensor parallel: two all-reduces per layer and pass, Megatron's volume") {
  const ModelConfig m = tiny_gpt();  // 4 heads: tp 2 and 4
  const int64_t batch = 2, seq = 16;
  for (int tp : {2, 4}) {
    CAPTURE(tp);
    const Graph g = build_graph(m, train(batch, seq), tp_options(tp, false, 2));
    const double expected = formulas::tp_layer_bytes_per_pass(batch, seq, m.hidden, tp, 4.0);
    for (int l = 0; l < 2; ++l) {
      for (Stage s : {Stage::forward, Stage::backward}) {
        const Collectives c = layer_collectives(g, l, s);
        CHECK(c.all_reduce == 2);
        CHECK(c.all_gather == 0);
        CHECK(c.reduce_scatter == 0);
        CHECK(c.regather == 0);
        CHECK(c.bytes == approx(expected));
      }
    }
    const Op& ar = op_named(g, "layer1.attn.o_proj.all_reduce");
    CHECK(ar.attrs.group == tp);
    CHECK(ar.attrs.group_stride == 1);
    CHECK(ar.stream == 0);
    CHECK(ar.count == 2);  // stands for 2 layers each
    CHECK(g.tensor(ar.outputs[0]).shape == std::vector<int64_t>{batch * seq, m.hidden});
    CHECK(op_named(g, "layer0.mlp.dgrad.all_reduce").stage == Stage::backward);
    CHECK(op_named(g, "layer0.attn.qkv.dgrad.all_reduce").stage == Stage::backward);
    // Outside the layers: the embedding's sum, the loss statistics, the head's input gradient.
    CHECK(op_named(g, "embedding.all_reduce").stage == Stage::forward);
    CHECK(op_named(g, "cross_entropy.all_reduce").attrs.payload_bytes == 3.0 * batch * seq * 4);
    CHECK(op_named(g, "lm_head.dgrad.all_reduce").stage == Stage::backward);
    CHECK(op_named(g, "cross_entropy").attrs.cols == 100 / tp);
  }
  // Collectives follow the precision: bf16 halves the bytes.
  const Graph b = stack(m, train(batch, seq), {"bf16"}, tp_options(2, false, 2));
  CHECK(layer_collectives(b, 0, Stage::forward).bytes ==
        approx(formulas::tp_layer_bytes_per_pass(batch, seq, m.hidden, 2, 2.0)));
}

TEST_CASE("tensor parallel: grad_accum multiplies the layers' collectives") {
  Workload w = train(2, 16);
  w.grad_accum = 3;
  const Graph g = build_graph(tiny_llama(), w, tp_options(2, true, 2));
  CHECK(op_named(g, "layer0.attn.o_proj.reduce_scatter").count == 6);  // 3 × 2 layers
  CHECK(op_named(g, "embedding.reduce_scatter").count == 3);
  CHECK(op_named(g, "layer0.mlp_norm.regather.all_gather").count == 6);
}

TEST_CASE("sequence parallel: all-gathers and reduce-scatters of the same volume, plus re-gathers") {
  const ModelConfig m = tiny_gpt();
  const int64_t batch = 2, seq = 16, t = batch * seq;
  const int tp = 2;
  const Graph g = build_graph(m, train(batch, seq), tp_options(tp, true, 2));
  const double expected = formulas::tp_layer_bytes_per_pass(batch, seq, m.hidden, tp, 4.0);
  for (Stage s : {Stage::forward, Stage::backward}) {
    const Collectives c = layer_collectives(g, 0, s);
    CHECK(c.all_reduce == 0);
    CHECK(c.all_gather == 2);
    CHECK(c.reduce_scatter == 2);
    CHECK(c.regather == (s == Stage::backward ? 2 : 0));
    CHECK(c.bytes == approx(expected));
  }
  // Norms and residuals run on T/tp rows; the GEMMs on all T.
  CHECK(op_named(g, "layer0.attn_norm").attrs.rows == t / tp);
  CHECK(op_named(g, "layer0.attn.residual").attrs.elements == t / tp * m.hidden);
  CHECK(op_named(g, "layer0.attn.q_proj").attrs.m == t);
  CHECK(op_named(g, "layer0.mlp_norm.bwd").attrs.rows == t / tp);
  const Op& ag = op_named(g, "layer0.attn_norm.all_gather");
  CHECK(g.tensor(ag.inputs[0]).shape == std::vector<int64_t>{t / tp, m.hidden});
  CHECK(g.tensor(ag.outputs[0]).shape == std::vector<int64_t>{t, m.hidden});
  const Op& rs = op_named(g, "layer0.mlp.fc2.reduce_scatter");
  CHECK(g.tensor(rs.outputs[0]).shape == std::vector<int64_t>{t / tp, m.hidden});
  // The weight gradients read the re-gathered norm output, not the forward's gathered copy.
  const Op& wgrad = op_named(g, "layer0.attn.q_proj.wgrad");
  CHECK(wgrad.inputs[0] == op_named(g, "layer0.attn_norm.regather.all_gather").outputs[0]);
  // The embedding's partial sums are reduce-scattered; its backward gathers the gradient.
  CHECK(op_named(g, "embedding.reduce_scatter").stage == Stage::forward);
  CHECK(op_named(g, "embedding.bwd.all_gather").stage == Stage::backward);
  CHECK(op_named(g, "final_norm.all_gather").stage == Stage::forward);
  CHECK(op_named(g, "lm_head.dgrad.reduce_scatter").stage == Stage::backward);
}

TEST_CASE("sequence parallel: tokens that do not split are a configuration error") {
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), decode(3, 20, 10), tp_options(2, true)), ConfigError);
  CHECK_NOTHROW((void)build_graph(tiny_llama(), decode(4, 20, 10), tp_options(2, true)));
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), train(1, 16), tp_options(3, false)), ConfigError);
}

TEST_CASE("tensor parallel: saved activations match Korthikanti et al. 2022 without dropout") {
  // Table 2 of Korthikanti et al. 2022 counts dropout, which these graphs do not have: its masks
  // (2·sbh, split by sp) and the attention dropout (mask and output, 3·a·s²·b, split by tp).
  // GPT-2 medium dims, b 1, s 1024, bf16, tp 2: TP saves sbh·(8 + 24/2) + 2·a·s²·b/2 = 36·sbh,
  // TP+SP sbh·(32 + 2·a·s/h)/2 = 32·sbh a layer.
  const ModelConfig m = gpt2_medium();
  const int64_t s = 1024, b = 1, tp = 2;
  const double sbh = static_cast<double>(s * b * m.hidden);
  auto expected = [&](bool sp) {
    const double dropout = 2.0 * sbh / (sp ? tp : 1) + 3.0 * m.heads * s * s * b / tp;
    return formulas::megatron_layer_activation_bytes(s, b, m.hidden, m.heads, tp, sp,
                                                     formulas::ActivationRecompute::none) -
           dropout;
  };
  const Graph tp_only = stack(m, train(b, s), {"bf16"}, tp_options(tp, false, 2));
  const Graph with_sp = stack(m, train(b, s), {"bf16"}, tp_options(tp, true, 2));
  CHECK(saved_activation_bytes(tp_only) == approx(24.0 * expected(false)));
  CHECK(saved_activation_bytes(with_sp) == approx(24.0 * expected(true)));
  CHECK(saved_activation_bytes(tp_only) == approx(24.0 * 36 * sbh));
  CHECK(saved_activation_bytes(with_sp) == approx(24.0 * 32 * sbh));
  // Sequence parallelism divides the whole layer's activations by tp.
  const Graph one = stack(m, train(b, s), {"bf16"}, BuildOptions{2});
  CHECK(saved_activation_bytes(with_sp) * tp == approx(saved_activation_bytes(one)));
}

TEST_CASE("tensor parallel: full recompute reruns the forward collectives in backward") {
  const Graph g = stack(tiny_llama(), train(2, 16), {"bf16", "recompute"}, tp_options(2, true, 2));
  const Op& rs = op_named(g, "layer1.attn.o_proj.reduce_scatter.recompute");
  CHECK(rs.recomputed);
  CHECK(rs.stage == Stage::backward);
  CHECK(has_op(g, "layer1.attn_norm.all_gather.recompute"));
}

TEST_CASE("tensor parallel: every phase passes the graph check and every pass") {
  struct Case {
    Workload w;
    std::vector<std::string> passes;
  };
  Workload host_train = train(2, 16);
  host_train.host_data = true;
  Workload host_decode = decode(2, 16, 8);
  host_decode.host_data = true;
  const std::vector<Case> cases = {
      {host_train, {"bf16", "flash_attention", "fusion", "recompute", "fused_optimizer",
                    "pinned_memory", "prefetch"}},
      {train(2, 16), {"fp16", "fusion", "recompute"}},
      {train(2, 16), {"tf32", "fp8"}},
      {prefill(2, 16, 8), {"bf16", "flash_attention", "paged_kv", "fusion"}},
      {host_decode, {"bf16", "flash_attention", "paged_kv", "fusion", "pinned_memory", "prefetch"}},
      {decode(2, 16, 8), {"fp8"}},
  };
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (const Case& c : cases) {
      for (bool sp : {false, true}) {
        CAPTURE(m.name);
        const std::string phase = name_of(c.w.phase);
          CAPTURE(phase);
        CAPTURE(sp);
        Graph g = build_graph(m, c.w, tp_options(2, sp));
        CHECK_NOTHROW(g.check());
        for (const std::string& p : c.passes) {
          CAPTURE(p);
          CHECK_NOTHROW(apply_graph_pass({p, {}}, g));
          CHECK_NOTHROW(g.check());
        }
      }
    }
  }
}
