// Context-parallel rank graphs (ring attention, Liu et al. 2023; Megatron-LM / Transformer
// Engine context parallelism): the load-balanced chunks and which half of a ring block a rank
// computes, per-rank GEMM and attention FLOPs against the single GPU's, the K/V and dK/dV
// send/recv per layer, the blocks' merges, saved activations, the overlap structure (and the
// timeline hiding the transfers), the rank's inputs and positions, and every phase through every
// pass alone and beside tensor and pipeline parallelism.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/builders/rank.hpp"
#include "core/builders/streams.hpp"
#include "core/cost/cost_model.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/parallel/plan.hpp"
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
  // tiny-llama: 4 heads of 16, batch 2, seq 16. Single GPU flash forward: 4·b·h·s²·d =
  // 4·2·4·256·16 = 131072 FLOPs per layer (the whole rectangle, causal or not). With cp = 2 each
  // rank runs 2 flash blocks of 8 × 8 queries × keys, 32768 each: the own block causal, the other
  // half of its rectangle (ring_block_rows), priced as the rectangle like the causal one.
  const ModelConfig m = tiny_llama();
  const Graph one = stack(m, train(2, 16), {"flash_attention"}, {});
  CHECK(op_flops(op_named(one, "layer0.attn.flash_attention"), one) == 131072.0);
  const Graph two = build_graph(m, train(2, 16), cp_options(2));
  const Op& own = op_named(two, "layer0.attn.ring0.flash_attention");
  const Op& other = op_named(two, "layer0.attn.ring1.flash_attention");
  CHECK(op_flops(own, two) == 32768.0);
  CHECK(op_flops(other, two) == 32768.0);
  CHECK(own.attrs.seq_q == 8);
  CHECK(own.attrs.seq_kv == 8);
  CHECK(own.attrs.causal);  // the diagonal block: half masked
  CHECK_FALSE(other.attrs.causal);
  CHECK(own.attrs.ring_step == 0);
  CHECK(other.attrs.ring_step == 1);
  CHECK(other.attrs.cp == 2);
  // Ring attention runs as flash attention blocks whatever the stack (Transformer Engine has no
  // materialized form of it): every stack's attention is the flash single GPU's / cp.
  for (const ModelConfig& mm : {tiny_llama(), tiny_gpt()}) {
    for (const Workload& w : {train(2, 16), prefill(2, 16, 8)}) {
      const Graph single = stack(mm, w, {"flash_attention"}, {});
      for (int cp : {2, 4, 8}) {
        for (int tp : {1, 2}) {
          CAPTURE(mm.name);
          CAPTURE(cp);
          CAPTURE(tp);
          const Graph g = build_graph(mm, w, cp_options(cp, tp));
          CHECK(attention_flops(g) * cp * tp == approx(attention_flops(single)));
        }
        const Graph fs = stack(mm, w, {"bf16", "flash_attention"}, {});
        const Graph fg = stack(mm, w, {"bf16", "flash_attention"}, cp_options(cp));
        CHECK(attention_flops(fg) * cp == approx(attention_flops(fs)));
      }
    }
  }
}

TEST_CASE("context parallel: the rank's rows and which half of a ring block it computes") {
  // seq 16, cp 2: local 8 rows, chunks of 4. Rank 0 holds positions 0-3 and 12-15, rank 1 4-11.
  const build::ContextRows r0 = build::context_rows(2, 0, 8), r1 = build::context_rows(2, 1, 8);
  CHECK(r0.chunk == 4);
  CHECK(r0.position(3) == 3);
  CHECK(r0.position(4) == 12);
  CHECK(r1.position(0) == 4);
  CHECK(r1.position(7) == 11);
  // Step 0: the own block, causal over all of it.
  const build::RingBlockRows own = build::ring_block_rows(4, 2, 0, 8);
  CHECK(own.causal);
  CHECK(own.q_first == 0);
  CHECK(own.kv_rows == 8);
  // cp 4, rank 2: step 1 brings rank 1's block (1 < 2: every query, its first chunk), step 3
  // rank 3's (3 > 2: the second chunk's queries, all of it).
  const build::RingBlockRows before = build::ring_block_rows(4, 2, 1, 8), after = build::ring_block_rows(4, 2, 3, 8);
  CHECK_FALSE(before.causal);
  CHECK(before.q_first == 0);
  CHECK(before.kv_rows == 4);
  CHECK_FALSE(after.causal);
  CHECK(after.q_first == 4);
  CHECK(after.kv_rows == 8);
  // Every rank meets every other rank's block once, in half its rectangle.
  for (int cp : {2, 3, 4}) {
    for (int r = 0; r < cp; ++r) {
      int64_t pairs = 0;
      for (int k = 1; k < cp; ++k) {
        const build::RingBlockRows b = build::ring_block_rows(cp, r, k, 8);
        pairs += (8 - b.q_first) * b.kv_rows;
      }
      CHECK(pairs == (cp - 1) * 32);
    }
  }
  CHECK_THROWS_AS((void)build::ring_block_rows(2, 0, 2, 8), ConfigError);
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
  auto block = [&](int j, const std::string& what) {
    return op_named(g, "layer0.attn.ring" + std::to_string(j) + "." + what);
  };
  for (int j = 1; j < 4; ++j) {
    CAPTURE(j);
    const Op& kv = block(j, "kv.send_recv");
    const Op& fa = block(j, "flash_attention");
    CHECK(fa.inputs[1] == kv.outputs[0]);  // K of step j
    CHECK(fa.inputs[2] == kv.outputs[1]);  // V of step j
    CHECK(fa.stream == 0);
    // Step j's transfer is issued before block j − 1, so it runs under it.
    CHECK(kv.id < block(j - 1, "flash_attention").id);
    // It forwards what the previous step received.
    if (j > 1) CHECK(kv.inputs[0] == block(j - 1, "kv.send_recv").outputs[0]);
    // Each block is merged into the output so far by its log-sum-exp.
    const Op& merge = block(j, "merge");
    CHECK(merge.kind == OpKind::attn_merge);
    CHECK(merge.inputs[2] == fa.outputs[0]);
    CHECK(merge.inputs[3] == fa.outputs[1]);
    const Op& before = j == 1 ? block(0, "flash_attention") : block(j - 1, "merge");
    CHECK(merge.inputs[0] == before.outputs[0]);
    CHECK(merge.inputs[1] == before.outputs[1]);
    // Backward: block j reads the K/V passed around again, and its dK/dV travel on with the
    // block: block 1's as they are, later ones added to what arrived with the block.
    const Op& bwd = block(j, "flash_attention.bwd");
    CHECK(bwd.inputs[1] == block(j, "kv.bwd.send_recv").outputs[0]);
    const Op& dkv = block(j, "dkv.send_recv");
    if (j == 1) {
      CHECK(dkv.inputs[0] == bwd.outputs[1]);
      CHECK(dkv.inputs[1] == bwd.outputs[2]);
    } else {
      const Op& acc = block(j, "dk_acc");
      CHECK(dkv.inputs[0] == acc.outputs[0]);
      CHECK(acc.inputs[0] == block(j - 1, "dkv.send_recv").outputs[0]);
      CHECK(acc.inputs[1] == bwd.outputs[1]);
      CHECK(dkv.inputs[1] == block(j, "dv_acc").outputs[0]);
    }
    CHECK(block(j, "dq_sum").inputs[1] == bwd.outputs[0]);
  }
  // The own block reads the rank's own K and V.
  CHECK(block(0, "flash_attention").inputs[1] == op_named(g, "layer0.attn.rope_k").outputs[0]);
  // The merged context goes to o_proj; every block's backward reads it and its log-sum-exp, as
  // Transformer Engine's does.
  const Op& merged = block(3, "merge");
  CHECK(op_named(g, "layer0.attn.o_proj").inputs[0] == merged.outputs[0]);
  for (int j = 0; j < 4; ++j) {
    CHECK(block(j, "flash_attention.bwd").inputs[3] == merged.outputs[0]);
    CHECK(block(j, "flash_attention.bwd").inputs[5] == merged.outputs[1]);
  }
  // After the last step the rank's own dK gathers every other rank's part.
  const Op& dk = op_named(g, "layer0.attn.ring.dk_sum");
  CHECK(dk.inputs[0] == block(0, "flash_attention.bwd").outputs[1]);
  CHECK(dk.inputs[1] == block(3, "dkv.send_recv").outputs[0]);
  CHECK(op_named(g, "layer0.attn.rope_k.bwd").inputs[0] == dk.outputs[0]);
  // The flash attention pass leaves the blocks as they are.
  const Graph f = stack(tiny_llama(), train(2, 32), {"bf16", "flash_attention"}, cp_options(4));
  CHECK(op_named(f, "layer0.attn.ring2.flash_attention").attrs.ring_step == 2);
  CHECK(op_named(f, "layer0.attn.ring3.merge").outputs[1] == op_named(f, "layer0.attn.ring0.flash_attention.bwd").inputs[5]);
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
  // count L/built), bf16, 2 of 4 layers built. Every saved tensor is token-wise (seq/cp rows),
  // and of attention the merged output and its log-sum-exp ([b, h, s/cp] fp32): exactly 1/cp of
  // the single GPU's with flash attention, which a cp rank runs whatever the stack.
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (int cp : {2, 4}) {
      CAPTURE(m.name);
      CAPTURE(cp);
      const Graph fone = stack(m, train(2, 64), {"bf16", "flash_attention"}, BuildOptions{2});
      const Graph g = stack(m, train(2, 64), {"bf16"}, cp_options(cp, 1, 1, 0, 2));
      const Graph fg = stack(m, train(2, 64), {"bf16", "flash_attention"}, cp_options(cp, 1, 1, 0, 2));
      CHECK(saved_activation_bytes(g) * cp == approx(saved_activation_bytes(fone)));
      CHECK(saved_activation_bytes(fg) * cp == approx(saved_activation_bytes(fone)));
    }
  }
}

TEST_CASE("context parallel: a rank's tokens, targets and positions are its chunks of each sequence") {
  // cp = 2 × dp = 2: the inputs are the data-parallel rank's sequences (stride tp·cp = 2), then
  // the context-parallel rank's chunks of each (stride tp = 1); rope and the embedding say the
  // group whose place gives the rows' positions.
  ParallelSpec p;
  p.cp = 2, p.dp = 2;
  const std::vector<StackStep> none;
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    CAPTURE(m.name);
    const Graph g = build_rank_graphs(m, train(2, 16), none, 0, p).front().graph;
    for (const char* name : {"tokens", "targets"}) {
      const Tensor* t = nullptr;
      for (const Tensor& x : g.tensors)
        if (x.name == name) t = &x;
      REQUIRE(t != nullptr);
      CHECK(t->elements() == 2 * 8);
      REQUIRE(t->shard.size() == 2);
      CHECK(t->shard[0].whole == std::vector<int64_t>{4, 16});
      CHECK(t->shard[0].parts == 2);
      CHECK(t->shard[0].stride == 2);
      CHECK(t->shard[1].whole == std::vector<int64_t>{2, 16});
      CHECK(t->shard[1].dim == 1);
      CHECK(t->shard[1].balanced);
      CHECK(t->shard[1].stride == 1);
    }
    CHECK(op_named(g, "embedding").attrs.cp == 2);
    CHECK(op_named(g, "embedding.bwd").attrs.cp == 2);
    if (m.rope) CHECK(op_named(g, "layer0.attn.rope_k.bwd").attrs.cp_stride == 1);
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
