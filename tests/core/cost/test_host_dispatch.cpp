// Eager steps paced by host dispatch: ops wait for the host to issue them, hand-checked on a
// three-op chain, and predict() adding those waits only for eager graphs.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/cost/cost_model.hpp"
#include "core/graph/op_metrics.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// x -> a -> b -> c: three residual adds over `elements[i]` fp32 elements, one stream.
Graph chain(const std::vector<int64_t>& elements) {
  Graph g;
  int prev = g.add_tensor({-1, "x", {elements.front()}, DType::fp32, TensorRole::input, 1});
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const int out = g.add_tensor({-1, "t" + std::to_string(i), {elements[i]}, DType::fp32,
                                  TensorRole::activation, 1});
    Op op;
    op.name = "add" + std::to_string(i);
    op.kind = OpKind::residual_add;
    op.dtype = DType::fp32;
    op.inputs = {prev, prev};
    op.outputs = {out};
    op.attrs.elements = elements[i];
    g.add_op(op);
    prev = out;
  }
  return g;
}

}  // namespace

TEST_CASE("host dispatch: a host-bound chain waits for each issue") {
  // Device times 2, 2, 50 us; the host needs 10 us per op. Issued at 10, 20, 30 us:
  // op0 runs 10-12 (waited 10), op1 20-22 (waited 8: ready at 12), op2 30-80 (waited 8).
  const Graph g = chain({1, 1, 1});
  const std::vector<HostIssue> each10us(3, HostIssue{0, 10e-6, 1});
  const std::vector<double> waits = host_paced_waits(g, {2e-6, 2e-6, 50e-6}, each10us);
  REQUIRE(waits.size() == 3);
  CHECK(waits[0] == approx(10e-6));
  CHECK(waits[1] == approx(8e-6));
  CHECK(waits[2] == approx(8e-6));
  // A device-bound chain never waits after the first issue: 50, 50, 50 us with 10 us issues.
  const std::vector<double> fed = host_paced_waits(g, {50e-6, 50e-6, 50e-6}, each10us);
  CHECK(fed[0] == approx(10e-6));
  CHECK(fed[1] == approx(0.0));
  CHECK(fed[2] == approx(0.0));
}

TEST_CASE("host dispatch: an op of several kernels overlaps its own issue") {
  // One op of 4 kernels: 2 us fixed, then 10 us per launch, issued kernels at 12, 22, 32, 42 us.
  // Host bound (8 us of device work, 2 per kernel): the last kernel runs 42-44; the op's time
  // is 44 us (a wait of 36 + its 8), not the whole issue (42) plus the whole device time (50).
  const Graph g = chain({1});
  const std::vector<HostIssue> four = {HostIssue{2e-6, 10e-6, 4}};
  const std::vector<double> bound = host_paced_waits(g, {8e-6}, four);
  CHECK(bound[0] == approx(36e-6));
  // Device bound (80 us, 20 per kernel): each kernel is issued before the last one ends, so
  // only the first issue (12 us) is waited for.
  const std::vector<double> fed = host_paced_waits(g, {80e-6}, four);
  CHECK(fed[0] == approx(12e-6));
  // One kernel: the whole issue, then the whole device time.
  const std::vector<double> one = host_paced_waits(g, {8e-6}, {HostIssue{2e-6, 10e-6, 1}});
  CHECK(one[0] == approx(12e-6));
}

TEST_CASE("host dispatch: predict() paces eager steps only, per kind") {
  Hardware hw;
  hw.name = "paced";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 1e12;
  hw.memory_bandwidth = 1e9;  // 12 bytes of a 1-element add: 12 ns
  hw.launch_eager = 1e-6;
  hw.launch_graph = 1e-6;
  hw.dispatch_eager = 10e-6;
  hw.dispatch_by_kind[OpKind::gemm] = 20e-6;  // not in this graph
  // 1-element adds: 12 ns + 1 us of device time each; issued every 10 us.
  Graph g = chain({1, 1, 1});
  const Prediction eager = predict(g, hw);
  const double device = 1e-6 + 12e-9;
  CHECK(eager.ops[0].host_wait == approx(10e-6));
  CHECK(eager.ops[1].host_wait == approx(10e-6 - device));
  CHECK(eager.ops[1].time == approx(10e-6));  // host bound: one op per issue
  CHECK(eager.ops[0].dispatch_time == approx(10e-6));
  // The step ends when the last op, issued at 30 us, has run.
  CHECK(eager.step_time == approx(30e-6 + device));
  g.graphed = true;
  const Prediction replayed = predict(g, hw);
  CHECK(replayed.ops[1].host_wait == 0.0);
  CHECK(replayed.step_time == approx(3 * device));
  // Without a dispatch figure the eager step is the sum of device times, as before.
  hw.dispatch_eager = 0;
  hw.dispatch_by_kind.clear();
  g.graphed = false;
  CHECK(predict(g, hw).step_time == approx(3 * device));
}

TEST_CASE("host dispatch: kernels launched per op") {
  Op scores;
  scores.kind = OpKind::attn_scores;
  scores.attrs.heads = 32;
  scores.attrs.kv_heads = 8;  // GQA groups of 4
  scores.attrs.batch = 1;
  CHECK(kernel_launches(scores) == 4);   // one call per query head of the group
  scores.attrs.batch = 32;
  CHECK(kernel_launches(scores) == 32);  // fewer calls per head than per (sequence, head)
  scores.kind = OpKind::attn_scores_bwd;
  CHECK(kernel_launches(scores) == 64);  // dQ and dK
  Op gemm;
  gemm.kind = OpKind::gemm;
  gemm.dtype = DType::bf16;
  CHECK(kernel_launches(gemm) == 1);
  gemm.dtype = DType::fp8;
  CHECK(kernel_launches(gemm) == 2);     // the activation is quantized first
  Op adamw;
  adamw.kind = OpKind::adamw;
  adamw.attrs.passes = 4;
  CHECK(kernel_launches(adamw) == 4);    // one sweep per pass
  adamw.attrs.passes = 1;
  CHECK(kernel_launches(adamw) == 1);    // fused
  Op norm_bwd;
  norm_bwd.kind = OpKind::rmsnorm_bwd;
  CHECK(kernel_launches(norm_bwd) == 2);  // rows, then the weight-gradient partials summed
  Op flash_bwd;
  flash_bwd.kind = OpKind::flash_attention_bwd;
  CHECK(kernel_launches(flash_bwd) == 3);
  Op emb_bwd;
  emb_bwd.kind = OpKind::embedding_bwd;
  emb_bwd.dtype = DType::bf16;
  emb_bwd.outputs = {1};
  CHECK(kernel_launches(emb_bwd) == 3);  // zero the fp32 sum, scatter-add, convert
  emb_bwd.outputs = {1, 2};
  CHECK(kernel_launches(emb_bwd) == 4);  // + learned positions' conversion
  emb_bwd.dtype = DType::fp32;
  CHECK(kernel_launches(emb_bwd) == 3);  // zero both tables, scatter-add in place
  emb_bwd.attrs.accumulate = true;
  CHECK(kernel_launches(emb_bwd) == 1);  // accumulating: the scatter alone
}
