// Pipeline-stage rank graphs: the stages cover every layer once, the embedding sits on the
// first and the head on the last, the send/recv pairs at the edges, counts and layer sampling
// within a stage, and every phase through every pass (also combined with tensor parallelism).
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/builders/streams.hpp"
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

BuildOptions stage_options(int pp, int stage, int tp = 1, bool sp = false, int64_t layers = 0) {
  BuildOptions o;
  o.layers = layers;
  o.parallel.pp = pp;
  o.parallel.tp = tp;
  o.parallel.sp = sp;
  o.stage = stage;
  return o;
}

bool has_op(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name) return true;
  return false;
}

const Op& op_named(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return g.ops.front();
}

std::vector<const Op*> send_recvs(const Graph& g, Stage s) {
  std::vector<const Op*> out;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::collective && op.attrs.collective == Collective::send_recv && op.stage == s)
      out.push_back(&op);
  return out;
}

// "layer12.attn.q_proj.weight" -> 12.
int layer_of(const std::string& name) { return std::stoi(name.substr(5, name.find('.') - 5)); }

double weight_bytes(const Graph& g) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::weight) b += t.bytes() * t.count;
  return b;
}

double flops(const Graph& g) {
  double f = 0;
  for (const Op& op : g.ops) f += op_flops(op, g) * op.count;
  return f;
}

}  // namespace

TEST_CASE("pipeline: the stages cover every layer exactly once") {
  const ModelConfig m = tiny_llama();  // 4 layers
  for (int pp : {2, 3, 4}) {
    CAPTURE(pp);
    std::map<int, int> seen;  // model layer -> stages holding it
    for (int s = 0; s < pp; ++s) {
      const Graph g = build_graph(m, train(2, 16), stage_options(pp, s));
      CHECK(g.layers_total == stage_layers(m.layers, pp, s));
      CHECK(g.layers_built == g.layers_total);
      std::set<int> layers;
      for (const Tensor& t : g.tensors)
        if (t.role == TensorRole::weight && t.name.rfind("layer", 0) == 0) layers.insert(layer_of(t.name));
      CHECK(static_cast<int64_t>(layers.size()) == g.layers_total);
      CHECK(*layers.begin() == stage_first_layer(m.layers, pp, s));
      for (int l : layers) ++seen[l];
      // Op::layer numbers the stage's layers from 0; names carry the model's index.
      for (const Op& op : g.ops) CHECK(op.layer < g.layers_built);
    }
    CHECK(static_cast<int64_t>(seen.size()) == m.layers);
    for (const auto& [layer, stages] : seen) CHECK(stages == 1);
  }
}

TEST_CASE("pipeline: the embedding only on the first stage, the head only on the last") {
  for (const Workload& w : {train(2, 16), prefill(2, 16, 8), decode(2, 16, 8)}) {
    const std::string phase = name_of(w.phase);
      CAPTURE(phase);
    const Graph first = build_graph(tiny_llama(), w, stage_options(3, 0));
    const Graph middle = build_graph(tiny_llama(), w, stage_options(3, 1));
    const Graph last = build_graph(tiny_llama(), w, stage_options(3, 2));
    CHECK(has_op(first, "embedding"));
    CHECK_FALSE(has_op(middle, "embedding"));
    CHECK_FALSE(has_op(last, "embedding"));
    CHECK_FALSE(has_op(first, "lm_head"));
    CHECK_FALSE(has_op(middle, "lm_head"));
    CHECK(has_op(last, "lm_head"));
    CHECK(has_op(last, "final_norm"));
    CHECK_FALSE(has_op(first, "final_norm"));
    CHECK(has_op(last, "cross_entropy") == (w.phase == Phase::train));
    CHECK_FALSE(has_op(first, "cross_entropy"));
    for (const Tensor& t : middle.tensors) CHECK(t.role != TensorRole::input);  // no tokens, no targets
  }
}

TEST_CASE("pipeline: send/recv at the stage edges") {
  Workload w = train(2, 16);
  w.grad_accum = 4;
  const ModelConfig m = tiny_llama();
  const int pp = 3;
  for (int s = 0; s < pp; ++s) {
    CAPTURE(s);
    const Graph g = build_graph(m, w, stage_options(pp, s));
    const auto fwd = send_recvs(g, Stage::forward);
    const auto bwd = send_recvs(g, Stage::backward);
    CHECK(fwd.size() == (s > 0 ? 1u : 0u) + (s < pp - 1 ? 1u : 0u));
    CHECK(bwd.size() == fwd.size());
    CHECK(has_op(g, "pipeline.recv") == (s > 0));
    CHECK(has_op(g, "pipeline.send") == (s < pp - 1));
    CHECK(has_op(g, "pipeline.recv_grad") == (s < pp - 1));
    CHECK(has_op(g, "pipeline.send_grad") == (s > 0));
    for (const auto* list : {&fwd, &bwd}) {
      for (const Op* op : *list) {
        CHECK(op->attrs.group == 2);
        CHECK(op->attrs.group_stride == 1);  // tp = cp = dp = 1
        const bool sends = !op->inputs.empty();
        if (list == &fwd) CHECK(op->stream == (sends ? pipeline_stream : pipeline_recv_stream));
        else CHECK(op->stream == (sends ? pipeline_grad_stream : pipeline_grad_recv_stream));
        CHECK(op->layer == -1);
        CHECK(op->count == 4);  // once per micro-batch
        const int moved = op->inputs.empty() ? op->outputs.at(0) : op->inputs.at(0);
        CHECK(g.tensor(moved).shape == std::vector<int64_t>{32, m.hidden});
      }
    }
    if (s > 0) {
      // The receive is the first op and writes the first layer's input.
      const Op& recv = op_named(g, "pipeline.recv");
      CHECK(recv.id == 0);
      CHECK(recv.outputs.at(0) == op_named(g, "layer" + std::to_string(stage_first_layer(m.layers, pp, s)) +
                                                  ".attn_norm").inputs.at(0));
    }
    if (s < pp - 1) {
      // The last forward op sends the last layer's output on.
      const Op& send = op_named(g, "pipeline.send");
      CHECK(g.ops[static_cast<std::size_t>(send.id) + 1].name == "pipeline.recv_grad");
    }
  }
  // The transfers carry the sequence-parallel share, and the stride skips the tp ranks.
  const Graph g = build_graph(m, train(2, 16), stage_options(2, 0, 2, true));
  const Op& send = op_named(g, "pipeline.send");
  CHECK(g.tensor(send.inputs.at(0)).shape == std::vector<int64_t>{16, m.hidden});
  CHECK(send.attrs.group_stride == 2);
}

TEST_CASE("pipeline: an interleaved stage holds its chunks' layers and passes each chunk on") {
  // tiny-llama's 4 layers over 2 stages × 2 chunks: virtual stage k holds layer k; stage 0 holds
  // chunks 0 and 2 (layers 0, 2), stage 1 chunks 1 and 3 (layers 1, 3).
  Workload w = train(2, 16);
  w.grad_accum = 2;
  const ModelConfig m = tiny_llama();
  for (int s = 0; s < 2; ++s) {
    CAPTURE(s);
    BuildOptions o = stage_options(2, s);
    o.parallel.interleave = 2;
    o.parallel.schedule = PipelineSchedule::interleaved;
    const Graph g = build_graph(m, w, o);
    std::set<int> layers;
    for (const Tensor& t : g.tensors)
      if (t.role == TensorRole::weight && t.name.rfind("layer", 0) == 0) layers.insert(layer_of(t.name));
    CHECK(layers == std::set<int>{s, s + 2});
    // Each chunk receives (but virtual stage 0) and sends on (but the last one), both ways.
    CHECK(has_op(g, "chunk0.pipeline.recv") == (s == 1));
    CHECK(has_op(g, "chunk1.pipeline.recv"));
    CHECK(has_op(g, "chunk0.pipeline.send"));
    CHECK(has_op(g, "chunk1.pipeline.send") == (s == 0));
    CHECK(has_op(g, "chunk0.pipeline.send_grad") == (s == 1));
    CHECK(has_op(g, "chunk1.pipeline.recv_grad") == (s == 0));
    CHECK(has_op(g, "embedding") == (s == 0));
    CHECK(has_op(g, "cross_entropy") == (s == 1));
    // Ops of a layer belong to its chunk; the forward walks chunk 0 then 1, the backward 1 then 0.
    std::vector<int> forward_chunks, backward_chunks;
    for (const Op& op : g.ops) {
      if (op.layer >= 0 && op.stage != Stage::optimizer) {
        CAPTURE(op.name);
        CHECK(op.chunk == (layer_of(op.name) - s) / 2);
      }
      auto& order = op.stage == Stage::forward ? forward_chunks : backward_chunks;
      if (op.stage != Stage::optimizer && (order.empty() || order.back() != op.chunk)) order.push_back(op.chunk);
    }
    CHECK(forward_chunks == std::vector<int>{0, 1});
    CHECK(backward_chunks.front() == 1);
    CHECK(backward_chunks.back() == 0);
  }
}

TEST_CASE("pipeline: inference stages pass activations forward only") {
  for (const Workload& w : {prefill(2, 16, 8), decode(2, 16, 8)}) {
    const Graph first = build_graph(tiny_llama(), w, stage_options(2, 0));
    const Graph last = build_graph(tiny_llama(), w, stage_options(2, 1));
    CHECK(send_recvs(first, Stage::forward).size() == 1);
    CHECK(send_recvs(last, Stage::forward).size() == 1);
    CHECK(send_recvs(first, Stage::backward).empty());
    const int64_t rows = w.phase == Phase::decode ? 2 : 32;
    CHECK(first.tensor(op_named(first, "pipeline.send").inputs.at(0)).shape ==
          std::vector<int64_t>{rows, 64});
    // The decode cache holds the stage's layers only.
    int caches = 0;
    for (const Tensor& t : last.tensors) caches += t.role == TensorRole::kv_cache;
    CHECK(caches == 4);  // 2 layers × K and V
  }
}

TEST_CASE("pipeline: the stages add up to the single-GPU model") {
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (const Workload& w : {train(2, 16), prefill(2, 16, 8)}) {
      CAPTURE(m.name);
      const std::string phase = name_of(w.phase);
      CAPTURE(phase);
      const Graph one = build_graph(m, w, {});
      double f = 0, weights = 0;
      for (int s = 0; s < 3; ++s) {
        const Graph g = build_graph(m, w, stage_options(3, s));
        f += flops(g);
        weights += weight_bytes(g);
      }
      // Tied embeddings: the last stage keeps its own copy of the table for the head, and
      // updates it (AdamW: 12 FLOPs an element).
      const double table = static_cast<double>(m.vocab * m.hidden);
      const double copy = m.tied_embeddings ? 4.0 * table : 0.0;
      const bool updated = m.tied_embeddings && w.phase == Phase::train;
      CHECK(f == approx(flops(one) + (updated ? 12.0 * table : 0.0)));
      CHECK(weights == approx(weight_bytes(one) + copy));
    }
  }
}

TEST_CASE("pipeline: tied embeddings sum their gradients across the first and last stages") {
  const ModelConfig m = tiny_gpt();
  const Graph first = build_graph(m, train(2, 16), stage_options(4, 0));
  const Graph middle = build_graph(m, train(2, 16), stage_options(4, 1));
  const Graph last = build_graph(m, train(2, 16), stage_options(4, 3));
  for (const Graph* g : {&first, &last}) {
    const Op& ar = op_named(*g, "embedding.grad.all_reduce");
    CHECK(ar.attrs.group == 2);
    CHECK(ar.attrs.group_stride == 3);  // stage 0 to stage 3
    CHECK(ar.stage == Stage::optimizer);
  }
  CHECK_FALSE(has_op(middle, "embedding.grad.all_reduce"));
  CHECK(op_named(last, "lm_head").attrs.trans_b);  // reads its copy of the table
  CHECK_FALSE(op_named(first, "embedding.bwd").attrs.accumulate);  // no head on this stage
}

TEST_CASE("pipeline: layer sampling scales within the stage") {
  const ModelConfig m = llama2_7b();  // 32 layers
  const Graph g = build_graph(m, decode(4, 512, 256), stage_options(2, 1, 1, false, 2));
  CHECK(g.layers_total == 16);
  CHECK(g.layers_built == 2);
  CHECK(g.layer_scale() == 8);
  CHECK(op_named(g, "layer16.mlp.down_proj").count == 8);
  CHECK(op_named(g, "layer17.mlp.down_proj").layer == 1);
  const Graph full = build_graph(m, decode(4, 512, 256), stage_options(2, 1));
  CHECK(flops(g) == approx(flops(full)));
}

TEST_CASE("pipeline: a stage outside the pipeline is a configuration error") {
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), train(2, 16), stage_options(2, 2)), ConfigError);
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), train(2, 16), stage_options(2, -1)), ConfigError);
  CHECK_THROWS_AS((void)build_graph(tiny_llama(), train(2, 16), stage_options(5, 0)), ConfigError);
}

TEST_CASE("pipeline: every phase and stage passes the graph check and every pass") {
  struct Case {
    Workload w;
    std::vector<std::string> passes;
  };
  Workload host_train = train(2, 16);
  host_train.host_data = true;
  host_train.grad_accum = 2;
  Workload host_decode = decode(2, 16, 8);
  host_decode.host_data = true;
  Workload host_prefill = prefill(2, 16, 8);
  host_prefill.host_data = true;
  const std::vector<Case> cases = {
      {host_train, {"bf16", "flash_attention", "fusion", "recompute", "fused_optimizer",
                    "pinned_memory", "prefetch"}},
      {train(2, 16), {"fp16", "fusion", "recompute"}},
      {host_prefill, {"bf16", "flash_attention", "paged_kv", "fusion", "pinned_memory", "prefetch"}},
      {host_decode, {"bf16", "flash_attention", "paged_kv", "fusion", "pinned_memory", "prefetch"}},
      {decode(2, 16, 8), {"fp8"}},
  };
  struct Layout {
    int pp, tp;
    bool sp;
  };
  for (const ModelConfig& m : {tiny_llama(), tiny_gpt()}) {
    for (const Layout& l : {Layout{2, 1, false}, Layout{3, 1, false}, Layout{2, 2, true}}) {
      for (int s = 0; s < l.pp; ++s) {
        for (const Case& c : cases) {
          CAPTURE(m.name);
          const std::string phase = name_of(c.w.phase);
          CAPTURE(phase);
          CAPTURE(l.pp);
          CAPTURE(l.tp);
          CAPTURE(s);
          Graph g = build_graph(m, c.w, stage_options(l.pp, s, l.tp, l.sp));
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
}

TEST_CASE("pipeline: full recompute keeps the received input and reruns the stage's layers") {
  const Graph g = [] {
    std::vector<StackStep> steps{{"+bf16", {{"bf16", {}}}}, {"+recompute", {{"recompute", {}}}}};
    return build_stack_graph(tiny_llama(), train(2, 16), steps, 1, stage_options(2, 1));
  }();
  CHECK(has_op(g, "layer2.attn_norm.recompute"));
  CHECK(has_op(g, "layer3.attn.q_proj.recompute"));
  const Op& recv = op_named(g, "pipeline.recv");
  CHECK_FALSE(recv.recomputed);
  CHECK(op_named(g, "layer2.attn_norm.recompute").inputs.at(0) == recv.outputs.at(0));
}
