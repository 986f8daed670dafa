// Selective activation recompute (recompute = "selective"): what it reruns and drops, its memory
// and FLOPs against Korthikanti et al. 2022, and how it meets flash attention and full recompute.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/formulas.hpp"
#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

const PassSpec selective{"recompute", std::nullopt, "selective"};
const PassSpec full{"recompute"};

Workload train_w(int64_t batch = 2, int64_t seq = 32) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch, w.seq = seq;
  return w;
}

Graph with(const ModelConfig& m, const Workload& w, const std::vector<PassSpec>& passes, int64_t layers = 2) {
  std::vector<StackStep> stack;
  for (const PassSpec& p : passes) stack.push_back({"+" + p.name, {p}});
  return build_stack_graph(m, w, stack, stack.size() - 1, BuildOptions{layers});
}

std::string config_error(const PassSpec& p) {
  try {
    validate(p);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Activations standing for every layer (count L/built > 1): what the layers save for backward.
double saved_activation_bytes(const Graph& g) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::activation && t.count > 1) b += t.bytes() * t.count;
  return b;
}

// FLOPs of the matrix products, every op the step runs (recomputed ones included).
double matmul_flops(const Graph& g) {
  double f = 0;
  for (const Op& op : g.ops) f += op_matmul_flops(op, g, false) * op.count;
  return f;
}

int count_recomputed(const Graph& g) {
  int n = 0;
  for (const Op& op : g.ops) n += op.recomputed;
  return n;
}

// Names and kinds of the ops, in order: two graphs that agree here are the same graph.
std::vector<std::string> signature(const Graph& g) {
  std::vector<std::string> out;
  for (const Op& op : g.ops) out.push_back(op.name + ":" + std::string(name_of(op.kind)));
  return out;
}

}  // namespace

TEST_CASE("selective recompute: spelled as recompute's word; plain recompute stays full") {
  CHECK(config_error(full).empty());
  CHECK(config_error({"recompute", 1.0}).empty());
  CHECK(config_error(selective).empty());
  CHECK(config_error({"recompute", std::nullopt, "full"}).empty());
  CHECK(config_error({"recompute", std::nullopt, "selectiv"}) ==
        "optimization 'recompute' takes one of full, selective (e.g. {recompute = \"full\"}); got 'selectiv' (did "
        "you mean 'selective'?)");
  CHECK_FALSE(config_error({"recompute", 0.0}).empty());
  // "full" is plain recompute.
  const ModelConfig m = tiny_gpt();
  CHECK(signature(with(m, train_w(), {{"recompute", std::nullopt, "full"}})) == signature(with(m, train_w(), {full})));
}

TEST_CASE("selective recompute reruns each layer's scores, softmax and context before its backward") {
  const ModelConfig m = tiny_gpt();  // 4 layers, 2 built
  const Graph base = with(m, train_w(), {{"fp32"}});
  const Graph g = with(m, train_w(), {selective});
  CHECK(count_recomputed(g) == 6);  // 3 ops × 2 built layers
  std::vector<int> writer(g.tensors.size(), -1);
  for (const Op& op : g.ops)
    for (int id : op.outputs) writer[static_cast<std::size_t>(id)] = op.id;
  for (const Op& op : g.ops) {
    if (!op.recomputed) continue;
    CAPTURE(op.name);
    CHECK(op.stage == Stage::backward);
    CHECK((op.kind == OpKind::attn_scores || op.kind == OpKind::attn_softmax || op.kind == OpKind::attn_context));
    // Q, K and V stay saved: the rerun reads the forward's projections.
    if (op.kind == OpKind::attn_scores)
      for (int id : op.inputs) CHECK_FALSE(g.ops[static_cast<std::size_t>(writer[static_cast<std::size_t>(id)])].recomputed);
  }
  // Each layer's backward reads P from the rerun; the forward's P now dies in the forward.
  for (const Op& op : g.ops)
    if (op.kind == OpKind::attn_context_bwd || op.kind == OpKind::attn_softmax_bwd) {
      CAPTURE(op.name);
      const int p = op.inputs.at(op.kind == OpKind::attn_context_bwd ? 1 : 0);
      CHECK(g.ops[static_cast<std::size_t>(writer[static_cast<std::size_t>(p)])].recomputed);
      CHECK(g.tensor(p).count == 1);
    }
  // Everything but the attention core is as before: the layer inputs are not the only thing saved.
  CHECK(saved_activation_bytes(g) < saved_activation_bytes(base));
  CHECK(saved_activation_bytes(g) > saved_activation_bytes(with(m, train_w(), {full})));
  // Inference has no backward: nothing to rerun.
  Workload prefill;
  prefill.phase = Phase::prefill;
  prefill.batch = 2, prefill.prompt = 16, prefill.new_tokens = 4;
  CHECK(count_recomputed(with(m, prefill, {selective})) == 0);
}

TEST_CASE("selective recompute on a GPT-3 175B layer: Korthikanti's memory and FLOPs") {
  // Korthikanti et al. 2022, §4.1 and Table 2, one layer, 16-bit, s = 2048, b = 1, h = 12288,
  // a = 96 (5as/h = 5·96·2048/12288 = 80): without recompute sbh(34 + 80) = 114·sbh, with
  // selective recompute 34·sbh; the attention core's 5as²b = 80·sbh is 70% of the layer.
  const int64_t s = 2048, b = 1, L = 96;
  const ModelConfig m = gpt("gpt-3-175b", L, 12288, 96, 51200, 2048);
  const double sbh = static_cast<double>(s * b * m.hidden);
  using formulas::ActivationRecompute;
  const double none = formulas::megatron_layer_activation_bytes(s, b, m.hidden, m.heads, 1, false, ActivationRecompute::none);
  const double sel = formulas::megatron_layer_activation_bytes(s, b, m.hidden, m.heads, 1, false,
                                                               ActivationRecompute::selective);
  CHECK(none == approx(114 * sbh));
  CHECK(sel == approx(34 * sbh));
  CHECK((none - sel) / none == approx(80.0 / 114.0));  // 0.70

  // The graph has no dropout: less its masks (2·sbh: after attention and after the MLP) and the
  // attention dropout's mask and output (3·a·s²·b = 48·sbh), Table 2 is what it saves. The
  // softmax output P (2·a·s²·b = 32·sbh) is the part of the core selective recompute drops.
  const double dropout = 2 * sbh + 3.0 * static_cast<double>(m.heads * s * s * b);
  const Graph plain = with(m, train_w(b, s), {{"bf16"}}, 1);
  const Graph g = with(m, train_w(b, s), {{"bf16"}, selective}, 1);
  CHECK(saved_activation_bytes(plain) == approx(L * (none - dropout)));  // 64·sbh a layer
  CHECK(saved_activation_bytes(plain) == approx(L * 64 * sbh));
  CHECK(saved_activation_bytes(g) == approx(L * (sel - 2 * sbh)));  // 32·sbh a layer
  CHECK(saved_activation_bytes(g) == approx(L * 32 * sbh));

  // FLOPs: the rerun adds Q·K^T and P·V of the forward, 2·2·b·s²·h a layer
  //   4 · 1 · 2048² · 12288 · 96 = 19,791,209,299,968.
  const double added = matmul_flops(g) - matmul_flops(plain);
  CHECK(added == approx(19791209299968.0));
  // Full recompute reruns the whole forward, 24·b·s·h² + 4·b·s²·h a layer: selective's extra
  // work is s/(6h + s) = 2048/75776 = 1/37 (2.7%) of full recompute's.
  const Graph f = with(m, train_w(b, s), {{"bf16"}, full}, 1);
  CHECK(added / (matmul_flops(f) - matmul_flops(plain)) == approx(1.0 / 37.0));
  // The model's FLOPs stay Megatron's eq. 3 without recompute: reruns are not the model's.
  const double model = formulas::megatron_train_flops(m, b, s, false);
  double model_flops = 0;
  for (const Op& op : g.ops)
    if (!op.recomputed) model_flops += op_matmul_flops(op, g, true) * op.count;
  CHECK(model_flops == approx(model).epsilon(1e-12));
}

TEST_CASE("selective recompute with flash attention: nothing to drop, in either order") {
  // Flash attention saves only O and the log-sum-exp, and its backward rebuilds the scores tile
  // by tile: there is no S or P to drop, so selective recompute leaves the graph as it is.
  for (const ModelConfig& m : {tiny_gpt(), tiny_llama()}) {
    CAPTURE(m.name);
    const Graph flash = with(m, train_w(), {{"bf16"}, {"flash_attention"}});
    const Graph flash_then = with(m, train_w(), {{"bf16"}, {"flash_attention"}, selective});
    const Graph then_flash = with(m, train_w(), {{"bf16"}, selective, {"flash_attention"}});
    CHECK(count_recomputed(flash_then) == 0);
    CHECK(count_recomputed(then_flash) == 0);
    CHECK(signature(flash_then) == signature(flash));
    CHECK(signature(then_flash) == signature(flash));
    CHECK(graph_flops(then_flash) == approx(graph_flops(flash)));
    CHECK(predict_memory(then_flash).peak == approx(predict_memory(flash).peak));
    CHECK(saved_activation_bytes(then_flash) == approx(saved_activation_bytes(flash)));
  }
}

TEST_CASE("selective and full recompute: full reruns the whole layer whichever comes first") {
  const ModelConfig m = tiny_llama();
  const Graph f = with(m, train_w(), {full});
  for (const auto& passes : std::vector<std::vector<PassSpec>>{{selective, full}, {full, selective}}) {
    const Graph g = with(m, train_w(), passes);
    CHECK(signature(g) == signature(f));
    CHECK(graph_flops(g) == approx(graph_flops(f)));
    CHECK(predict_memory(g).peak == approx(predict_memory(f).peak));
  }
  // Selective twice is selective once.
  CHECK(signature(with(m, train_w(), {selective, selective})) == signature(with(m, train_w(), {selective})));
}

TEST_CASE("selective recompute keeps a layer-sampled graph's peak that of the full model") {
  const ModelConfig m = tiny_llama();  // 4 layers
  const double whole = predict_memory(with(m, train_w(2, 64), {selective}, 0)).peak;
  for (int64_t built : {1, 2}) CHECK(predict_memory(with(m, train_w(2, 64), {selective}, built)).peak == approx(whole));
}

TEST_CASE("selective recompute under tensor and sequence parallelism: Table 2's selective rows") {
  // Korthikanti et al. 2022, Table 2, selective recompute: TP sbh(10 + 24/t), TP + SP 34·sbh/t.
  // Less dropout's masks (2·sbh, split by t with SP) the graphs save sbh(8 + 24/t) and 32·sbh/t:
  // GPT-2 medium dims, b 1, s 1024, bf16, t = 2: 20·sbh and 16·sbh a layer.
  const ModelConfig m = gpt2_medium();
  const int64_t s = 1024, b = 1, tp = 2;
  const double sbh = static_cast<double>(s * b * m.hidden);
  using formulas::ActivationRecompute;
  for (const bool sp : {false, true}) {
    CAPTURE(sp);
    BuildOptions o{2};
    o.parallel.tp = tp;
    o.parallel.sp = sp;
    std::vector<StackStep> stack{{"bf16", {{"bf16"}}}, {"+selective", {selective}}};
    const Graph g = build_stack_graph(m, train_w(b, s), stack, 1, o);
    const double table2 =
        formulas::megatron_layer_activation_bytes(s, b, m.hidden, m.heads, tp, sp, ActivationRecompute::selective);
    const double dropout = 2 * sbh / (sp ? tp : 1);
    CHECK(saved_activation_bytes(g) == approx(24 * (table2 - dropout)));
    CHECK(saved_activation_bytes(g) == approx(24 * (sp ? 16 : 20) * sbh));
  }
}
