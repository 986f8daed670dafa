// Context-parallel rank graphs (ring attention, Liu et al. 2023; Megatron-LM / Transformer
// Engine context parallelism): the load-balanced chunks, per-rank GEMM and attention FLOPs
// against the single GPU's, the K/V and dK/dV send/recv per layer, saved activations, the
// overlap structure (and the timeline hiding the transfers), and every phase through every pass alone and beside tensor and pipeline
// parallelism.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "approx.hpp"
#include "core/build/builders.hpp"
#include "core/build/rank.hpp"
#include "core/build/streams.hpp"
#include "core/cost/cost_model.hpp"
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

Workload prefill(int64_t batch, int64_t prompt, int64_t new_tokens) {
  Workload w;
  w.phase = Phase::prefill;
  w.batch = batch, w.prompt = prompt, w.new_tokens = new_tokens;
  return w;
}

Workload decode(int64_t batch, int64_t prompt, int64_t new_tokens) {
  Workload w = prefill(batch, prompt, new_tokens);
  w.phase = Phase::decode;
  return w;
}

BuildOptions cp_options(int cp, int tp = 1, int pp = 1, int stage = 0, int64_t layers = 0) {
  BuildOptions o;
  o.layers = layers;
  o.parallel.cp = cp;
  o.parallel.tp = tp;
  o.parallel.pp = pp;
  o.stage = stage;
  return o;
}

const Op& op_named(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return g.ops.front();
}

int op_index(const Graph& g, const std::string& name) { return op_named(g, name).id; }

double layer_gemm_flops(const Graph& g) {
  double f = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::gemm && op.layer >= 0) f += op_flops(op, g) * op.count;
  return f;
}

double attention_flops(const Graph& g) {
  double f = 0;
  for (const Op& op : g.ops)
    if (class_of(op.kind) == OpClass::attention) f += op_flops(op, g) * op.count;
  return f;
}

// The ring's send/recv ops of one layer and pass whose name contains `what` (".kv.send_recv",
// ".kv.bwd.", ".dkv.").
std::vector<const Op*> ring_ops(const Graph& g, int layer, Stage s, const std::string& what) {
  std::vector<const Op*> out;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::collective && op.attrs.collective == Collective::send_recv &&
        op.layer == layer && op.stage == s && op.name.find(what) != std::string::npos)
      out.push_back(&op);
  return out;
}

// Activations standing for every layer (count L/built > 1): what the layers save for backward.
double saved_activation_bytes(const Graph& g) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::activation && t.count > 1) b += t.bytes() * t.count;
  return b;
}

Graph stack(const ModelConfig& m, const Workload& w, const std::vector<std::string>& names,
            const BuildOptions& o) {
  std::vector<StackStep> steps;
  for (const auto& n : names) steps.push_back({"+" + n, {{n, {}}}});
  return build_stack_graph(m, w, steps, steps.size() - 1, o);
}

}  // namespace

TEST_CASE("context parallel: load-balanced chunks give every rank the same causal work") {
  // 2·cp chunks; rank i holds chunks i and 2cp − 1 − i.
  CHECK(build::context_chunks(1, 0).first == 0);
  CHECK(build::context_chunks(1, 0).second == 1);
  CHECK(build::context_chunks(4, 0).first == 0);
  CHECK(build::context_chunks(4, 0).second == 7);
  CHECK(build::context_chunks(4, 3).first == 3);
  CHECK(build::context_chunks(4, 3).second == 4);
  CHECK_THROWS_AS((void)build::context_chunks(4, 4), ConfigError);
  CHECK_THROWS_AS((void)build::context_chunks(2, -1), ConfigError);
  // seq 16, cp 2, chunks of 4: rank 0 holds positions 0-3 and 12-15, whose queries see
  // (1+2+3+4) + (13+14+15+16) = 68 keys; rank 1 positions 4-11: (5+...+12) = 68.
  CHECK(build::context_causal_pairs(16, 2, 0) == 68);
  CHECK(build::context_causal_pairs(16, 2, 1) == 68);
  CHECK(build::context_causal_pairs(16, 1, 0) == 16 * 17 / 2);
  CHECK(build::context_causal_pairs(15, 1, 0) == 15 * 16 / 2);
  // Every rank does 1/cp of the sequence's causal pairs.
  for (int cp : {2, 4, 8}) {
    const int64_t seq = 64;
    for (int r = 0; r < cp; ++r) {
      CAPTURE(cp);
      CAPTURE(r);
      CHECK(build::context_causal_pairs(seq, cp, r) * cp == seq * (seq + 1) / 2);
    }
  }
}

TEST_CASE("context parallel: default cp = 1 builds the single-GPU graph") {
  for (const Workload& w : {train(2, 16), prefill(2, 16, 8)}) {
    const Graph a = build_graph(tiny_llama(), w, {});
    const Graph b = build_graph(tiny_llama(), w, cp_options(1));
    REQUIRE(a.ops.size() == b.ops.size());
    REQUIRE(a.tensors.size() == b.tensors.size());
    for (std::size_t i = 0; i < a.ops.size(); ++i) {
      CHECK(a.ops[i].name == b.ops[i].name);
      CHECK(a.ops[i].inputs == b.ops[i].inputs);
      CHECK(a.ops[i].outputs == b.ops[i].outputs);
      CHECK(a.ops[i].stream == b.ops[i].stream);
    }
  }
}

TEST_CASE("context parallel: decode is refused, a sequence that does not split is too") {
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), decode(2, 16, 8), cp_options(2)), ConfigError);
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), train(2, 18), cp_options(2)), ConfigError);
  CHECK_NOTHROW((void)build_graph(tiny_llama(), train(2, 16), cp_options(2)));
}

TEST_CASE("context parallel: token-wise ops run on seq/cp tokens; GEMM FLOPs × cp = single GPU's") {
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (const Workload& w : {train(2, 16), prefill(2, 16, 8)}) {
      const Graph one = build_graph(m, w, {});
      for (int cp : {2, 4}) {
        CAPTURE(m.name);
        CAPTURE(cp);
        const std::string phase = name_of(w.phase);
        CAPTURE(phase);
        const Graph g = build_graph(m, w, cp_options(cp));
        const int64_t local = 2 * 16 / cp;  // batch · seq/cp
        CHECK(op_named(g, "layer0.attn.q_proj").attrs.m == local);
        CHECK(op_named(g, "layer0.attn_norm").attrs.rows == local);
        CHECK(op_named(g, "embedding").attrs.rows == local);
        CHECK(layer_gemm_flops(g) * cp == approx(layer_gemm_flops(one)));
        if (w.phase == Phase::train) {
          CHECK(op_flops(op_named(g, "lm_head"), g) * cp == approx(op_flops(op_named(one, "lm_head"), one)));
          CHECK(op_named(g, "cross_entropy").attrs.rows == local);
        }
        // tp × cp: each splits the GEMMs once more.
        if (cp == 2) {
          const Graph gt = build_graph(m, w, cp_options(cp, 2));
          CHECK(layer_gemm_flops(gt) * cp * 2 == approx(layer_gemm_flops(one)));
        }
      }
    }
  }
}

TEST_CASE("context parallel: attention FLOPs × cp = single GPU's causal attention FLOPs") {
  // tiny-llama: 4 heads of 16, batch 2, seq 16. Single GPU forward: QK^T and PV each
  // 2·b·h·s²·d = 2·2·4·256·16 = 65536 FLOPs per layer. With cp = 2 each rank runs 2 blocks of
  // 8 × 8 queries × keys: 2·(2·2·4·64·16) = 32768 for each of the two.
  const ModelConfig m = tiny_llama();
  const Graph one = build_graph(m, train(2, 16), {});
  CHECK(op_flops(op_named(one, "layer0.attn.scores"), one) == 65536.0);
  const Graph two = build_graph(m, train(2, 16), cp_options(2));
  CHECK(op_flops(op_named(two, "layer0.attn.ring0.scores"), two) +
            op_flops(op_named(two, "layer0.attn.ring1.scores"), two) == 32768.0);
  const Op& own = op_named(two, "layer0.attn.ring0.scores");
  CHECK(own.attrs.seq_q == 8);
  CHECK(own.attrs.seq_kv == 8);
  CHECK(own.attrs.causal);  // the diagonal block: half masked
  for (const ModelConfig& mm : {tiny_llama(), tiny_gpt()}) {
    for (const Workload& w : {train(2, 16), prefill(2, 16, 8)}) {
      const Graph single = build_graph(mm, w, {});
      for (int cp : {2, 4, 8}) {
        for (int tp : {1, 2}) {
          CAPTURE(mm.name);
          CAPTURE(cp);
          CAPTURE(tp);
          const Graph g = build_graph(mm, w, cp_options(cp, tp));
          CHECK(attention_flops(g) * cp * tp == approx(attention_flops(single)));
        }
        // The same through flash attention (one fused op per block).
        const Graph fs = stack(mm, w, {"bf16", "flash_attention"}, {});
        const Graph fg = stack(mm, w, {"bf16", "flash_attention"}, cp_options(cp));
        CHECK(attention_flops(fg) * cp == approx(attention_flops(fs)));
      }
    }
  }
}

TEST_CASE("context parallel: K/V pass the ring cp − 1 times forward, K/V and dK/dV backward") {
  const ModelConfig m = tiny_llama();  // KV heads 2 × 16 = 32 wide
  const int64_t batch = 2, seq = 16;
  for (int cp : {2, 4}) {
    for (int tp : {1, 2}) {
      CAPTURE(cp);
      CAPTURE(tp);
      const Graph g = build_graph(m, train(batch, seq), cp_options(cp, tp, 1, 0, 2));
      // The local K and V blocks in fp32: 2 · b · seq/cp · kv_dim/tp · 4 bytes.
      const double kv_bytes = 2.0 * batch * (seq / cp) * (32 / tp) * 4;
      for (int l = 0; l < 2; ++l) {
        const auto fwd = ring_ops(g, l, Stage::forward, ".kv.send_recv");
        const auto bwd_kv = ring_ops(g, l, Stage::backward, ".kv.bwd.");
        const auto bwd_dkv = ring_ops(g, l, Stage::backward, ".dkv.");
        CHECK(fwd.size() == static_cast<std::size_t>(cp - 1));
        CHECK(bwd_kv.size() == static_cast<std::size_t>(cp - 1));
        CHECK(bwd_dkv.size() == static_cast<std::size_t>(cp - 1));
        CHECK(ring_ops(g, l, Stage::forward, "send_recv").size() == fwd.size());
        for (const auto* list : {&fwd, &bwd_kv, &bwd_dkv}) {
          for (const Op* op : *list) {
            CHECK(op->attrs.group == cp);
            CHECK(op->attrs.group_stride == tp);  // cp_stride(): tensor-parallel ranks inside
            CHECK(op->stream == context_stream);
            CHECK(op->attrs.payload_bytes == kv_bytes);
            CHECK(op->count == 2);  // stands for 2 layers each
          }
        }
      }
    }
  }
  // The payload follows the blocks' precision: bf16 halves it.
  const Graph b = stack(m, train(batch, seq), {"bf16"}, cp_options(2, 1, 1, 0, 2));
  CHECK(op_named(b, "layer0.attn.ring1.kv.send_recv").attrs.payload_bytes == 2.0 * batch * 8 * 32 * 2);
  CHECK(op_named(b, "layer0.attn.ring1.dkv.send_recv").attrs.payload_bytes == 2.0 * batch * 8 * 32 * 2);
  // The loss statistics' stated payload stays fp32.
  const Graph bt = stack(m, train(batch, seq), {"bf16"}, cp_options(2, 2, 1, 0, 2));
  CHECK(op_named(bt, "cross_entropy.all_reduce").attrs.payload_bytes == 3.0 * batch * 8 * 4);
  // Prefill: the forward ring only.
  const Graph p = build_graph(m, prefill(batch, seq, 8), cp_options(4, 1, 1, 0, 2));
  CHECK(ring_ops(p, 0, Stage::forward, ".kv.send_recv").size() == 3);
  CHECK(ring_ops(p, 0, Stage::backward, "send_recv").empty());
}

TEST_CASE("context parallel: each block waits for its K/V block, the transfers overlap the blocks") {
  const Graph g = build_graph(tiny_llama(), train(2, 32), cp_options(4));
  for (int j = 1; j < 4; ++j) {
    CAPTURE(j);
    const std::string ring = "layer0.attn.ring" + std::to_string(j);
    const Op& kv = op_named(g, ring + ".kv.send_recv");
    const Op& scores = op_named(g, ring + ".scores");
    const Op& context = op_named(g, ring + ".context");
    CHECK(scores.inputs[1] == kv.outputs[0]);   // K of step j
    CHECK(context.inputs[1] == kv.outputs[1]);  // V of step j
    CHECK(scores.stream == 0);
    // Step j's transfer is issued before block j − 1, so it runs under it.
    CHECK(kv.id < op_index(g, "layer0.attn.ring" + std::to_string(j - 1) + ".scores"));
    // It forwards what the previous step received.
    if (j > 1) CHECK(kv.inputs[0] == op_named(g, "layer0.attn.ring" + std::to_string(j - 1) + ".kv.send_recv").outputs[0]);
    // Backward: the partial dK/dV of block j go back around the ring after block j's backward.
    const Op& dkv = op_named(g, ring + ".dkv.send_recv");
    CHECK(dkv.inputs[0] == op_named(g, ring + ".scores.bwd").outputs[1]);
    CHECK(dkv.inputs[1] == op_named(g, ring + ".context.bwd").outputs[1]);
    CHECK(op_named(g, ring + ".scores.bwd").inputs[2] == op_named(g, ring + ".kv.bwd.send_recv").outputs[0]);
  }
  // The own block reads the rank's own K and V.
  CHECK(op_named(g, "layer0.attn.ring0.scores").inputs[1] == op_named(g, "layer0.attn.rope_k").outputs[0]);
  // The merged context goes to o_proj.
  CHECK(op_named(g, "layer0.attn.o_proj").inputs[0] == op_named(g, "layer0.attn.ring3.merge").outputs[0]);
  // Flash attention: every block's backward reads the merged output, as Transformer Engine's does.
  const Graph f = stack(tiny_llama(), train(2, 32), {"bf16", "flash_attention"}, cp_options(4));
  const int merged = op_named(f, "layer0.attn.o_proj").inputs[0];
  for (int j = 0; j < 4; ++j)
    CHECK(op_named(f, "layer0.attn.ring" + std::to_string(j) + ".flash_attention.bwd").inputs[3] == merged);
}

TEST_CASE("context parallel: on the timeline the ring's transfers hide under the blocks") {
  // Every op 1 µs: with the transfers on the context stream each forward K/V transfer runs
  // beside the previous block's three attention ops, so at least one µs per transfer is saved
  // against the same graph on one stream.
  for (int cp : {2, 4}) {
    CAPTURE(cp);
    Graph g = build_graph(tiny_llama(), train(2, 32), cp_options(cp, 1, 1, 0, 2));
    const std::vector<double> seconds(g.ops.size(), 1e-6);
    const double overlapped = timeline_makespan(g, seconds);
    for (Op& op : g.ops) op.stream = 0;
    const double serial = timeline_makespan(g, seconds);
    CHECK(serial - overlapped >= approx(2 * (cp - 1) * 1e-6));
  }
}

TEST_CASE("context parallel: saved activations per rank are the single GPU's / cp") {
  // What is compared: activations written by a layer's forward and read in backward (saved,
  // count L/built), bf16, 2 of 4 layers built. Every saved tensor is token-wise (seq/cp rows)
  // or a probability block (cp blocks of (s/cp)² = s²/cp): exactly 1/cp materialized. With flash
  // attention each block keeps its own log-sum-exp ([b, h, s/cp] fp32, cp of them: the single
  // GPU's b·h·s·4 bytes a layer), so cp ranks hold (cp − 1) of those more per layer than one GPU
  // (tiny models make that visible: hidden 64 for 4 heads).
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (int cp : {2, 4}) {
      CAPTURE(m.name);
      CAPTURE(cp);
      const Graph one = stack(m, train(2, 64), {"bf16"}, BuildOptions{2});
      const Graph g = stack(m, train(2, 64), {"bf16"}, cp_options(cp, 1, 1, 0, 2));
      CHECK(saved_activation_bytes(g) * cp == approx(saved_activation_bytes(one)));
      const Graph fone = stack(m, train(2, 64), {"bf16", "flash_attention"}, BuildOptions{2});
      const Graph fg = stack(m, train(2, 64), {"bf16", "flash_attention"}, cp_options(cp, 1, 1, 0, 2));
      const double lse = 2.0 * m.heads * 64 * 4;  // b · h · s fp32, one layer
      CHECK(saved_activation_bytes(fg) * cp ==
            approx(saved_activation_bytes(fone) + (cp - 1) * lse * m.layers));
    }
  }
}

TEST_CASE("context parallel: full recompute reruns the forward ring in backward") {
  const Graph g = stack(tiny_llama(), train(2, 16), {"bf16", "recompute"}, cp_options(2, 1, 1, 0, 2));
  const Op& kv = op_named(g, "layer1.attn.ring1.kv.send_recv.recompute");
  CHECK(kv.recomputed);
  CHECK(kv.stage == Stage::backward);
  CHECK(kv.stream == context_stream);
}

TEST_CASE("context parallel: every phase × layout passes the graph check and every pass") {
  struct Case {
    Workload w;
    std::vector<std::string> passes;
  };
  Workload host_train = train(2, 16);
  host_train.host_data = true;
  Workload host_prefill = prefill(2, 16, 8);
  host_prefill.host_data = true;
  Workload accum = train(2, 16);
  accum.grad_accum = 2;
  const std::vector<Case> cases = {
      {host_train, {"bf16", "flash_attention", "fusion", "recompute", "fused_optimizer",
                    "pinned_memory", "prefetch"}},
      {accum, {"fp16", "fusion", "recompute", "flash_attention"}},
      {train(2, 16), {"tf32", "fp8"}},
      {train(2, 16), {"bf16", "recompute", "flash_attention", "fusion"}},
      {prefill(2, 16, 8), {"bf16", "flash_attention", "paged_kv", "fusion"}},
      {host_prefill, {"bf16", "flash_attention", "fusion", "pinned_memory", "prefetch"}},
      {prefill(2, 16, 8), {"fp8"}},
  };
  struct Layout {
    const char* name;
    BuildOptions o;
  };
  std::vector<Layout> layouts = {{"cp=2", cp_options(2)}, {"cp=4", cp_options(4)},
                                 {"cp=2 tp=2", cp_options(2, 2)},
                                 {"cp=2 pp=2 stage 0", cp_options(2, 1, 2, 0)},
                                 {"cp=2 pp=2 stage 1", cp_options(2, 1, 2, 1)}};
  BuildOptions sp = cp_options(2, 2);
  sp.parallel.sp = true;
  layouts.push_back({"cp=2 tp=2 sp", sp});
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (const Case& c : cases) {
      for (const Layout& lay : layouts) {
        CAPTURE(m.name);
        const std::string phase = name_of(c.w.phase);
        CAPTURE(phase);
        CAPTURE(lay.name);
        Graph g = build_graph(m, c.w, lay.o);
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
