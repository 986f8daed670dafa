// Data parallelism and ZeRO on a rank's training graph: gradient buckets in backward order on
// the gradient stream, the sharded training state per rank against ZeRO's closed form, the
// parameter gathers of stage 3, and what the timeline makes of the communication.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include "approx.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/formulas.hpp"
#include "core/errors.hpp"
#include "core/parallel/data_parallel.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

Graph bf16_train(int64_t grad_accum = 1, int64_t layers = 0) {
  Workload w;
  w.phase = Phase::train;
  w.batch = 2;
  w.seq = 128;
  w.grad_accum = grad_accum;
  BuildOptions o;
  o.layers = layers;
  return build_stack_graph(tiny_llama(), w, {StackStep{"bf16", {PassSpec{"bf16", {}}}, ""}}, 0, o);
}

ParallelSpec dp(int ranks, int zero, double bucket = 25.0 * 1024 * 1024) {
  ParallelSpec p;
  p.dp = ranks;
  p.zero = zero;
  p.bucket_bytes = bucket;
  return p;
}

std::vector<const Op*> collectives(const Graph& g, Collective c) {
  std::vector<const Op*> out;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::collective && op.attrs.collective == c) out.push_back(&op);
  return out;
}

// Bytes of the training state a rank holds all step (weights, masters, gradients, AdamW
// states), every layer counted.
double model_state_bytes(const Graph& g) {
  double b = 0;
  for (const Tensor& t : g.tensors) {
    const bool state = t.role == TensorRole::weight || t.role == TensorRole::master_weight ||
                       t.role == TensorRole::gradient || t.role == TensorRole::optimizer_state;
    if (state && is_persistent(t)) b += t.bytes() * t.count;
  }
  return b;
}

double parameters(const Graph& g) {
  double n = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::weight) n += static_cast<double>(t.elements()) * t.count;
  return n;
}

Hardware h100_like() {
  Hardware hw;
  hw.name = "test-h100";
  hw.peak_flops[static_cast<int>(DType::bf16)] = 989e12;
  hw.peak_flops[static_cast<int>(DType::fp32)] = 67e12;
  hw.memory_bandwidth = 3.35e12;
  hw.nvlink = {450e9, 3e-6};
  hw.gpus_per_node = 8;
  hw.sm_count = 132;
  return hw;
}

}  // namespace

TEST_CASE("data parallel: one rank without sharding changes nothing") {
  Graph g = bf16_train();
  const std::size_t ops = g.ops.size();
  apply_data_parallel(g, dp(1, 0));
  CHECK(g.ops.size() == ops);
}

TEST_CASE("data parallel: DDP all-reduces every gradient once, in buckets, as backward finishes them") {
  Graph g = bf16_train();
  double grad_bytes = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::gradient) grad_bytes += t.bytes();
  apply_data_parallel(g, dp(8, 0, 16 * 1024.0));  // 16 KiB buckets: several per layer
  const auto reduces = collectives(g, Collective::all_reduce);
  REQUIRE(reduces.size() > 4 + 1);  // more than one bucket per layer
  std::set<int> seen;
  double payload = 0;
  for (const Op* op : reduces) {
    CHECK(op->stream == gradient_stream);
    CHECK(op->attrs.group == 8);
    payload += op->attrs.payload_bytes;
    for (int id : op->inputs) {
      const Tensor& t = g.tensor(id);
      if (t.name.find(".buffer") != std::string::npos) continue;
      CHECK(t.role == TensorRole::gradient);
      CHECK(seen.insert(id).second);  // in one bucket only
      // The bucket goes out after the last op that writes its gradient.
      int last_writer = -1;
      for (const Op& w : g.ops)
        if (w.kind != OpKind::collective && w.stage == Stage::backward)
          for (int out : w.outputs)
            if (out == id) last_writer = w.id;
      CHECK(last_writer >= 0);
      CHECK(last_writer < op->id);
    }
  }
  CHECK(payload == approx(grad_bytes));
  // A bucket never spans two layers, and the buckets of a layer stand for every layer.
  for (const Op* op : reduces) {
    std::set<int> layers;
    for (int id : op->inputs) (void)id;
    CHECK(op->count == approx(op->layer >= 0 ? g.layer_scale() : 1.0));
  }
}

TEST_CASE("data parallel: per-rank training state follows ZeRO's closed form") {
  // Every layer built, so tensors count once. Stage by stage, the rank holds the paper's
  // (Rajbhandari et al. 2020, §5.1) bytes plus what the framework keeps beside them:
  //   0  DDP's bucket buffers, a second copy of the 16-bit gradients: + 2Ψ
  //   1  fp32 gradient shards for AdamW and 16-bit weight shards to gather from: + 6Ψ/N
  //   2  the same shards; the gradients themselves are transient: + 4Ψ/N
  //   3  an fp32 gradient shard where the paper counts a 16-bit one: + 2Ψ/N
  const Graph base = bf16_train(1, 4);
  const double psi = parameters(base);
  const int n = 8;
  const double extra[] = {2 * psi, 6 * psi / n, 4 * psi / n, 2 * psi / n};
  for (int stage = 0; stage <= 3; ++stage) {
    CAPTURE(stage);
    Graph g = base;
    apply_data_parallel(g, dp(n, stage));
    CHECK(model_state_bytes(g) == approx(formulas::zero_model_state_bytes(psi, n, stage) + extra[stage]).epsilon(2e-3));
  }
}

TEST_CASE("data parallel: ZeRO-3 gathers each layer's weights before its forward and its backward") {
  Graph g = bf16_train(1, 4);
  apply_data_parallel(g, dp(8, 3));
  const auto gathers = collectives(g, Collective::all_gather);
  // Per layer a forward and a backward gather, and one for the weights outside the layers.
  CHECK(gathers.size() == 4 * 2 + 1);
  CHECK(collectives(g, Collective::reduce_scatter).size() >= 4);
  CHECK(collectives(g, Collective::all_reduce).empty());
  for (const Op* op : gathers) {
    CHECK(op->stream == gather_stream);
    for (int id : op->outputs) CHECK(g.tensor(id).transient);
  }
  // Every GEMM of a layer reads gathered weights, never a shard.
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::gemm || op.layer < 0) continue;
    for (int id : op.inputs)
      if (g.tensor(id).role == TensorRole::weight) CHECK(g.tensor(id).name.find(".gathered") != std::string::npos);
  }
  // Layer 2's forward gather is issued as layer 1 starts: prefetched one layer ahead.
  int gather2 = -1, first_op_layer1 = -1;
  for (const Op& op : g.ops) {
    if (op.name == "layer2.zero.all_gather") gather2 = op.id;
    if (first_op_layer1 < 0 && op.layer == 1 && op.stage == Stage::forward && op.kind != OpKind::collective)
      first_op_layer1 = op.id;
  }
  REQUIRE(gather2 >= 0);
  CHECK(gather2 == first_op_layer1 - 1);
  // Sharding every state leaves a smaller peak than plain DDP.
  Graph ddp = bf16_train(1, 4);
  apply_data_parallel(ddp, dp(8, 0));
  const Hardware hw = h100_like();
  CHECK(predict_memory(g, hw, true).peak < predict_memory(ddp, hw, true).peak);
}

TEST_CASE("data parallel: ZeRO-2 reduces every micro-batch and frees the full gradients") {
  Graph g = bf16_train(4);
  apply_data_parallel(g, dp(8, 2));
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::gradient && t.name.find(".shard") == std::string::npos) CHECK(t.transient);
  for (const Op* op : collectives(g, Collective::reduce_scatter))
    CHECK(op->count == approx((op->layer >= 0 ? g.layer_scale() : 1.0) * 4));
  // No op accumulates into a full gradient any more: each micro-batch's is reduced.
  for (const Op& op : g.ops)
    if (op.kind == OpKind::gemm && op.stage == Stage::backward) CHECK_FALSE(op.attrs.accumulate);
  // ZeRO-1 reduces once per step and keeps the gradients.
  Graph z1 = bf16_train(4);
  apply_data_parallel(z1, dp(8, 1));
  for (const Op* op : collectives(z1, Collective::reduce_scatter))
    CHECK(op->count == approx(op->layer >= 0 ? z1.layer_scale() : 1.0));
}

TEST_CASE("data parallel: the timeline hides part of DDP's all-reduce behind backward") {
  Graph g = bf16_train(1, 4);
  apply_data_parallel(g, dp(8, 0, 16 * 1024.0));
  const Prediction p = predict(g, h100_like());
  CHECK(p.communication_time > 0);
  CHECK(p.exposed_communication >= 0);
  CHECK(p.exposed_communication < p.communication_time);
}

TEST_CASE("data parallel: an inference graph has no gradients to average") {
  Workload w;
  Graph g = build_stack_graph(tiny_llama(), w, {}, 0);
  CHECK_THROWS_WITH_AS(apply_data_parallel(g, dp(8, 0)),
                       "data parallelism needs a training step: the graph has no optimizer", ConfigError);
}

TEST_CASE("data parallel: the fused optimizer's single op leaves each parameter in its layer") {
  Workload w;
  w.phase = Phase::train;
  w.batch = 2;
  w.seq = 128;
  const StackStep bf16{"bf16", {PassSpec{"bf16", {}}}, ""};
  const StackStep fused{"+fused", {PassSpec{"fused_optimizer", {}}}, ""};
  BuildOptions o;
  o.layers = 2;  // sampled: per-layer collectives stand for two layers each
  Graph plain = build_stack_graph(tiny_llama(), w, {bf16}, 0, o);
  Graph one_op = build_stack_graph(tiny_llama(), w, {bf16, fused}, 1, o);
  for (int stage : {0, 3}) {
    CAPTURE(stage);
    Graph a = plain, b = one_op;
    apply_data_parallel(a, dp(8, stage));
    apply_data_parallel(b, dp(8, stage));
    for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter}) {
      double bytes_a = 0, bytes_b = 0;
      for (const Op* op : collectives(a, c)) bytes_a += op->attrs.payload_bytes * op->count;
      for (const Op* op : collectives(b, c)) bytes_b += op->attrs.payload_bytes * op->count;
      CHECK(collectives(a, c).size() == collectives(b, c).size());
      CHECK(bytes_b == approx(bytes_a));
    }
  }
}

TEST_CASE("data parallel: context-parallel ranks average gradients with the data-parallel ones") {
  // dp 2 · cp 2 ranks hold the same weights; tp 2 puts them 2 apart.
  Workload w;
  w.phase = Phase::train;
  w.batch = 2;
  w.seq = 128;
  BuildOptions o;
  o.parallel.dp = 2;
  o.parallel.cp = 2;
  o.parallel.tp = 2;
  Graph g = build_stack_graph(tiny_llama(), w, {StackStep{"bf16", {PassSpec{"bf16", {}}}, ""}}, 0, o);
  apply_data_parallel(g, o.parallel);
  int buckets = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::collective && op.attrs.collective == Collective::all_reduce && op.stream == gradient_stream) {
      ++buckets;
      CHECK(op.attrs.group == 4);
      CHECK(op.attrs.group_stride == 2);
    }
  CHECK(buckets > 0);
}

TEST_CASE("data parallel: hybrid_shard shards within a node and all-reduces the shards across nodes") {
  // 16 data-parallel ranks on nodes of 8: ZeRO-3 over each node's 8, replicated on 2 nodes.
  Graph g = bf16_train();
  ParallelSpec p = dp(16, 0);
  p.fsdp = FsdpStrategy::hybrid_shard;
  p.node_gpus = 8;
  CHECK(p.shard_ranks() == 8);
  const double full_weights = [&] {
    double n = 0;
    for (const Tensor& t : g.tensors)
      if (t.role == TensorRole::weight) n += static_cast<double>(t.elements()) * t.count;
    return n;
  }();
  apply_data_parallel(g, p);
  CHECK_NOTHROW(g.check());
  int scatters = 0, across = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::collective) continue;
    if (op.attrs.collective == Collective::reduce_scatter || op.attrs.collective == Collective::all_gather) {
      CHECK(op.attrs.group == 8);
      CHECK(op.attrs.group_stride == 1);
      scatters += op.attrs.collective == Collective::reduce_scatter;
    }
    if (op.attrs.collective == Collective::all_reduce) {
      ++across;
      CHECK(op.attrs.group == 2);
      CHECK(op.attrs.group_stride == 8);
    }
  }
  CHECK(scatters > 0);
  CHECK(across == scatters);  // every reduce-scattered bucket's shard goes across the nodes
  double sharded = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::weight && !t.transient) sharded += static_cast<double>(t.elements()) * t.count;
  CHECK(sharded == approx(full_weights / 8).epsilon(0.01));  // 1/8 of the weights per rank, not 1/16
}
