// Mixture-of-experts layers: the routed experts as batched GEMMs over capacity-sized buffers,
// the parameters the graph holds against the model's count, the FLOPs per token against
// 2 · active parameters, and expert parallelism's all-to-alls and per-rank experts.
#include <doctest/doctest.h>

#include <string>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/builders/rank.hpp"
#include "core/cost/cost_model.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/parallel/data_parallel.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

Workload train(int64_t batch, int64_t seq) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch;
  w.seq = seq;
  return w;
}

// Σ elements × count of the graph's weights: the parameters of the rank.
double weight_elements(const Graph& g, bool experts_only = false) {
  double n = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::weight && (!experts_only || t.expert)) n += static_cast<double>(t.elements()) * t.count;
  return n;
}

const Op* find_op(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name) return &op;
  return nullptr;
}

int count_collectives(const Graph& g, Collective c) {
  int n = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::collective && op.attrs.collective == c) ++n;
  return n;
}

}  // namespace

TEST_CASE("moe: the graph holds every expert and the router, as the model counts them") {
  for (int64_t shared : {0, 2}) {
    CAPTURE(shared);
    const ModelConfig m = tiny_moe(shared);
    const Graph g = build_train(m, train(2, 32));
    CHECK_NOTHROW(g.check());
    CHECK(weight_elements(g) == approx(static_cast<double>(m.params())));
    // 4 layers × 8 experts × 3 · 64 · 64 routed expert weights.
    CHECK(weight_elements(g, true) == approx(4.0 * 8 * 3 * 64 * 64));
  }
}

TEST_CASE("moe: capacity is capacity_factor times an even share of the routed tokens") {
  const ModelConfig m = tiny_moe();
  BuildOptions o;
  build::RankShape r = build::rank_shape(m, train(2, 32), o);
  // 64 tokens · top 2 / 8 experts = 16 rows each; × 1.25 = 20.
  CHECK(r.expert_capacity(64) == 20);
  r.capacity_factor = 1.0;
  CHECK(r.expert_capacity(64) == 16);
  CHECK(r.expert_capacity(1) == 1);  // one token still needs a row
  const Graph g = build_train(m, train(2, 32));
  const Op* route = find_op(g, "layer0.mlp.route");
  REQUIRE(route != nullptr);
  CHECK(route->kind == OpKind::moe_route);
  CHECK(route->attrs.capacity == 20);
  CHECK(route->attrs.top_k == 2);
  const Op* gate = find_op(g, "layer0.mlp.experts.gate_proj");
  REQUIRE(gate != nullptr);
  CHECK(gate->attrs.batch == 8);
  CHECK(gate->attrs.m == 20);
  CHECK(gate->attrs.n == 64);
  CHECK(gate->attrs.k == 64);
  CHECK(gate->attrs.model_share == approx(64.0 * 2 / (8 * 20)));  // 0.8 of the rows are real tokens
  for (const char* name : {"layer0.mlp.combine.bwd", "layer0.mlp.dispatch.bwd", "layer0.mlp.route.bwd",
                           "layer0.mlp.experts.down_proj.wgrad", "layer0.mlp.router.wgrad"})
    CHECK_MESSAGE(find_op(g, name) != nullptr, name);
}

TEST_CASE("moe: forward model FLOPs per token are 2 · active parameters plus attention") {
  // Mixtral 8x7B, one sequence of 4,096 tokens, capacity factor 1 so no row is padding.
  ModelConfig m = mixtral_8x7b();
  m.capacity_factor = 1.0;
  Workload w;
  w.phase = Phase::prefill;
  w.batch = 1;
  w.prompt = 4096;
  w.new_tokens = 1;
  BuildOptions o;
  o.layers = 1;
  const Graph g = build_prefill(m, w, o);
  double gemm = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::gemm && op.layer >= 0) gemm += op_flops(op, g) * op.count;
  // Per layer and token: 2 · (attention 41,943,040 + router 32,768 + 2 experts · 176,160,768).
  const double per_token = 2.0 * (41943040.0 + 32768.0 + 2 * 176160768.0);
  CHECK(gemm / 4096 / 32 == approx(per_token).epsilon(1e-9));
}

TEST_CASE("moe: expert parallelism holds experts/ep per rank and all-to-alls the buffers") {
  const ModelConfig m = tiny_moe();
  BuildOptions o;
  o.parallel.dp = 4;
  o.parallel.ep = 4;
  o.parallel.zero = 1;
  const Graph g = build_train(m, train(2, 32), o);
  CHECK_NOTHROW(g.check());
  CHECK(weight_elements(g, true) == approx(4.0 * 2 * 3 * 64 * 64));  // 2 of the 8 experts
  // Forward: dispatch and return; backward: their mirrors. One layer's worth per layer.
  CHECK(count_collectives(g, Collective::all_to_all) == 4 * 4);
  const Op* a2a = find_op(g, "layer0.mlp.dispatch.all_to_all");
  REQUIRE(a2a != nullptr);
  CHECK(a2a->attrs.group == 4);
  CHECK(a2a->attrs.group_stride == 1);
  // [8 experts, 20 rows, 64] out; [2 local experts, 4 · 20 rows, 64] in.
  CHECK(g.tensor(a2a->inputs[0]).shape == std::vector<int64_t>{8, 20, 64});
  CHECK(g.tensor(a2a->outputs[0]).shape == std::vector<int64_t>{2, 80, 64});
  const Op* gate = find_op(g, "layer0.mlp.experts.gate_proj");
  REQUIRE(gate != nullptr);
  CHECK(gate->attrs.batch == 2);
  CHECK(gate->attrs.m == 80);
}

const Tensor* find_tensor(const Graph& g, const std::string& name) {
  for (const Tensor& t : g.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

TEST_CASE("moe: a rank's expert weights are its experts, then its part of each one's width") {
  // tp = 2 inside dp = 4 with ep = 2: the ep ranks are 2 apart (stride tp).
  const ModelConfig m = tiny_moe();
  BuildOptions o;
  o.parallel.tp = 2;
  o.parallel.dp = 4;
  o.parallel.ep = 2;
  const Graph g = build_train(m, train(2, 32), o);
  const Tensor* gate = find_tensor(g, "layer0.mlp.experts.gate_proj.weight");
  const Tensor* down = find_tensor(g, "layer0.mlp.experts.down_proj.weight");
  const Tensor* grad = find_tensor(g, "layer0.mlp.experts.down_proj.weight.grad");
  REQUIRE(gate != nullptr);
  REQUIRE(down != nullptr);
  REQUIRE(grad != nullptr);
  CHECK(gate->shape == std::vector<int64_t>{4, 64, 32});
  REQUIRE(gate->shard.size() == 2);
  CHECK(gate->shard[0].of == gate->name);
  CHECK(gate->shard[0].whole == std::vector<int64_t>{8, 64, 64});
  CHECK(gate->shard[0].dim == 0);
  CHECK(gate->shard[0].parts == 2);
  CHECK(gate->shard[0].stride == 2);
  CHECK(gate->shard[1].whole == std::vector<int64_t>{4, 64, 64});
  CHECK(gate->shard[1].dim == 2);  // column-parallel
  CHECK(gate->shard[1].parts == 2);
  CHECK(gate->shard[1].stride == 1);
  REQUIRE(down->shard.size() == 2);
  CHECK(down->shard[1].dim == 1);  // row-parallel
  REQUIRE(grad->shard.size() == 2);  // the gradient is the same part of the whole's
  CHECK(grad->shard[0].of == grad->name);
  // The router is whole on every rank.
  const Tensor* router = find_tensor(g, "layer0.mlp.router.weight");
  REQUIRE(router != nullptr);
  CHECK(router->shard.empty());
}

TEST_CASE("moe: under expert parallelism the experts' gradient is scaled by 1/ep in and back out") {
  const ModelConfig m = tiny_moe();
  BuildOptions o;
  o.parallel.dp = 4;
  o.parallel.ep = 4;
  const Graph g = build_train(m, train(2, 32), o);
  for (const char* name : {"layer0.mlp.combine.bwd", "layer0.mlp.dispatch.bwd"}) {
    const Op* op = find_op(g, name);
    REQUIRE(op != nullptr);
    CHECK(op->attrs.expert_grad_scale == 0.25);
  }
  const Graph single = build_train(m, train(2, 32), BuildOptions{});
  const Op* op = find_op(single, "layer0.mlp.combine.bwd");
  REQUIRE(op != nullptr);
  CHECK(op->attrs.expert_grad_scale == 1);
}

TEST_CASE("moe: ZeRO shards a rank's experts, not the whole's") {
  // dp = 4, ep = 2: each expert on 2 ranks, its training state sharded over them, a flat part of
  // the rank's experts.
  const ModelConfig m = tiny_moe();
  BuildOptions o;
  o.parallel.dp = 4;
  o.parallel.ep = 2;
  o.parallel.zero = 1;
  Graph g = build_train(m, train(2, 32), o);
  apply_data_parallel(g, o.parallel);
  const Tensor* shard = find_tensor(g, "layer0.mlp.experts.up_proj.weight.grad.shard");
  REQUIRE(shard != nullptr);
  REQUIRE(shard->shard.size() == 2);
  CHECK(shard->shard[0].of == "layer0.mlp.experts.up_proj.weight.grad");
  CHECK(shard->shard[0].whole == std::vector<int64_t>{8, 64, 64});
  CHECK(shard->shard[1].whole == std::vector<int64_t>{4, 64, 64});
  CHECK(shard->shard[1].dim == -1);
  CHECK(shard->shard[1].parts == 2);
  CHECK(shard->shard[1].stride == 2);  // one in every ep ranks
  CHECK(shard->elements() == 4 * 64 * 64 / 2);
}

TEST_CASE("moe: data parallelism averages expert gradients over the ranks holding the same experts") {
  const ModelConfig m = tiny_moe();
  BuildOptions o;
  o.parallel.dp = 8;
  o.parallel.ep = 2;
  Graph g = build_train(m, train(2, 32), o);
  apply_data_parallel(g, o.parallel);
  CHECK_NOTHROW(g.check());
  int expert_buckets = 0, dense_buckets = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::collective || op.attrs.collective != Collective::all_reduce) continue;
    bool expert = false;
    for (int id : op.inputs) expert = expert || g.tensor(id).expert || g.tensor(id).name.find("experts") != std::string::npos;
    if (expert) {
      ++expert_buckets;
      CHECK(op.attrs.group == 4);         // 8 data-parallel ranks / ep 2
      CHECK(op.attrs.group_stride == 2);  // one in every ep consecutive ranks
    } else {
      ++dense_buckets;
      CHECK(op.attrs.group == 8);
      CHECK(op.attrs.group_stride == 1);
    }
  }
  CHECK(expert_buckets > 0);
  CHECK(dense_buckets > 0);
}

TEST_CASE("moe: parallel.ep is checked against the model and dp") {
  const Workload w = train(2, 32);
  ParallelSpec p;
  p.dp = 4;
  p.ep = 3;
  CHECK_THROWS_WITH_AS(validate(p, tiny_moe(), w), doctest::Contains("parallel.ep = 3 does not divide tiny-moe's 8 experts"),
                       ConfigError);
  p.ep = 8;
  CHECK_THROWS_WITH_AS(validate(p, tiny_moe(), w), doctest::Contains("parallel.ep = 8 must divide dp = 4"), ConfigError);
  p.ep = 2;
  CHECK_THROWS_WITH_AS(validate(p, tiny_llama(), w), doctest::Contains("needs a mixture-of-experts model"),
                       ConfigError);
  CHECK_NOTHROW(validate(p, tiny_moe(), w));
}

TEST_CASE("moe: under tensor parallelism the router's gradients add up to the single rank's") {
  // Each tp rank holds half of every expert's width, so its dweights and dlogits are partial
  // sums: the router's input gradient stays partial (leave_tp sums it with the experts'), its
  // weight gradient reads dlogits all-reduced over the two ranks.
  const ModelConfig m = tiny_moe();
  BuildOptions o;
  o.parallel.tp = 2;
  const Graph g = build_train(m, train(2, 32), o);
  CHECK_NOTHROW(g.check());
  const Op* dgrad = find_op(g, "layer0.mlp.router.dgrad");
  const Op* wgrad = find_op(g, "layer0.mlp.router.wgrad");
  const Op* reduce = find_op(g, "layer0.mlp.route.bwd.all_reduce");
  const Op* route_bwd = find_op(g, "layer0.mlp.route.bwd");
  REQUIRE(dgrad != nullptr);
  REQUIRE(wgrad != nullptr);
  REQUIRE(reduce != nullptr);
  REQUIRE(route_bwd != nullptr);
  CHECK(dgrad->inputs[0] == route_bwd->outputs[0]);  // partial dlogits
  CHECK(reduce->inputs[0] == route_bwd->outputs[0]);
  CHECK(reduce->attrs.group == 2);
  CHECK(wgrad->inputs[1] == reduce->outputs[0]);     // whole dlogits
  CHECK(find_op(g, "layer0.mlp.combine.bwd.dweights.all_reduce") == nullptr);
  // Each rank: half of every expert's width (8 experts · 3 · 64 · 32 a layer).
  CHECK(weight_elements(g, true) == approx(4.0 * 8 * 3 * 64 * 32));
}
