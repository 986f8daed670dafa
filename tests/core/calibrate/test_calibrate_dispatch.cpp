// fit_dispatch(): eager times made by the host-paced timeline from a known dispatch per kind
// and a known extra gap: the dispatch is the measured host time, the gap comes back from the fit.
#include <doctest/doctest.h>

#include <stdexcept>

#include "approx.hpp"
#include "core/calibrate/dispatch.hpp"
#include "core/cost/cost_model.hpp"
#include "core/graph/op_metrics.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// A chain of ops of the given kinds, each reading the previous one's output.
Graph chain_of(const std::vector<OpKind>& kinds) {
  Graph g;
  int prev = g.add_tensor({-1, "x", {8}, DType::fp32, TensorRole::input, 1});
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const int out = g.add_tensor({-1, "t" + std::to_string(i), {8}, DType::fp32, TensorRole::activation, 1});
    Op op;
    op.name = "op" + std::to_string(i);
    op.kind = kinds[i];
    op.inputs = {prev};
    op.outputs = {out};
    g.add_op(op);
    prev = out;
  }
  return g;
}

// Eager medians as the paced timeline makes them: graph median + the queued cost, plus waits
// (a launch waited for seen `wait` late).
EagerCase synthetic(const Graph& g, const std::vector<double>& graph_medians,
                    const std::map<OpKind, double>& dispatch, double queued, double wait) {
  std::vector<double> host, device;
  std::vector<HostIssue> issue;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    device.push_back(graph_medians[i] + queued);
    host.push_back(dispatch.at(g.ops[i].kind));
    issue.push_back(HostIssue{0, host.back(), 1});
  }
  const std::vector<double> waits = host_paced_waits(g, device, issue, true, wait);
  std::vector<double> eager;
  for (std::size_t i = 0; i < g.ops.size(); ++i) eager.push_back(device[i] + waits[i]);
  return {g, graph_medians, eager, host};
}

}  // namespace

TEST_CASE("calibrate: the eager dispatch per kind and both launch costs come back from the fit") {
  const std::map<OpKind, double> dispatch = {{OpKind::gemm, 14e-6}, {OpKind::rmsnorm, 7e-6},
                                             {OpKind::residual_add, 5e-6}};
  const double queued = 0.8e-6, wait = 1.5e-6;
  // Small ops in a row are host bound (they show the dispatch and the wait), long GEMMs let
  // the host run ahead (the ops queued behind them show the queued cost); two graphs of
  // different mixes.
  const Graph a = chain_of({OpKind::rmsnorm, OpKind::gemm, OpKind::residual_add, OpKind::rmsnorm,
                            OpKind::gemm, OpKind::gemm, OpKind::residual_add, OpKind::residual_add});
  const Graph b = chain_of({OpKind::residual_add, OpKind::residual_add, OpKind::residual_add, OpKind::gemm,
                            OpKind::rmsnorm, OpKind::rmsnorm, OpKind::gemm, OpKind::rmsnorm});
  const std::vector<EagerCase> cases = {
      synthetic(a, {3e-6, 40e-6, 1.5e-6, 3e-6, 8e-6, 60e-6, 1.5e-6, 1.5e-6}, dispatch, queued, wait),
      synthetic(b, {1.5e-6, 1.5e-6, 1.5e-6, 25e-6, 3e-6, 3e-6, 4e-6, 3e-6}, dispatch, queued, wait)};
  const DispatchFit fit = fit_dispatch(cases, 1e-6);
  CHECK(fit.by_kind.at(OpKind::gemm) == approx(14e-6));
  CHECK(fit.by_kind.at(OpKind::rmsnorm) == approx(7e-6));
  CHECK(fit.by_kind.at(OpKind::residual_add) == approx(5e-6));
  CHECK(fit.dispatch_eager == approx(7e-6));  // median of the three
  // The candidates step by 6.5%: each recovered within a step.
  CHECK(fit.launch_eager - 1e-6 == approx(queued).epsilon(0.065));
  CHECK(fit.launch_wait == approx(wait).epsilon(0.065));
  CHECK(fit.step_error < 0.02);
  CHECK_THROWS_AS((void)fit_dispatch({}, 1e-6), std::invalid_argument);
}

TEST_CASE("calibrate: ops timed behind a held stream fix the queued cost, the eager steps the wait") {
  const std::map<OpKind, double> dispatch = {{OpKind::gemm, 14e-6}, {OpKind::rmsnorm, 7e-6},
                                             {OpKind::residual_add, 5e-6}};
  const Graph a = chain_of({OpKind::rmsnorm, OpKind::gemm, OpKind::residual_add, OpKind::rmsnorm,
                            OpKind::gemm, OpKind::gemm, OpKind::residual_add, OpKind::residual_add});
  const std::vector<double> graph = {3e-6, 40e-6, 1.5e-6, 3e-6, 8e-6, 60e-6, 1.5e-6, 1.5e-6};
  auto with_held = [&](EagerCase c, double queued) {
    for (double t : c.graph_medians) c.held_medians.push_back(t + queued);
    return c;
  };
  // Consistent: held ops show 0.4 us queued, the paced eager times that and a 2 us wait.
  const DispatchFit fit = fit_dispatch({with_held(synthetic(a, graph, dispatch, 0.4e-6, 2e-6), 0.4e-6)}, 1e-6);
  CHECK(fit.launch_eager - 1e-6 == approx(0.4e-6).epsilon(0.065));
  CHECK(fit.launch_wait == approx(2e-6).epsilon(0.065));
  // The held times decide the queued cost even where the eager times alone would put 1.5 us
  // on every kernel.
  const EagerCase in_step = synthetic(a, graph, dispatch, 1.5e-6, 0.0);
  CHECK(fit_dispatch({in_step}, 1e-6).launch_eager - 1e-6 == approx(1.5e-6).epsilon(0.065));
  CHECK(fit_dispatch({with_held(in_step, 0.4e-6)}, 1e-6).launch_eager - 1e-6 == approx(0.4e-6).epsilon(0.065));
  // Held medians of another length are refused.
  EagerCase bad = with_held(in_step, 0.4e-6);
  bad.held_medians.pop_back();
  CHECK_THROWS_AS((void)fit_dispatch({bad}, 1e-6), std::invalid_argument);
}

TEST_CASE("calibrate: kinds of a varying kernel count get a fixed host cost per op and one per kernel") {
  // Materialized attention issues one call per sequence and head group: host = 20 us + 8 us
  // per call, seen at 1, 4 and 8 calls.
  Graph g = chain_of({OpKind::attn_scores, OpKind::attn_scores, OpKind::attn_scores, OpKind::gemm});
  const int64_t batch[] = {1, 1, 2};
  const int64_t kv_heads[] = {8, 2, 2};
  std::vector<double> host;
  for (int i = 0; i < 3; ++i) {
    OpAttrs& a = g.ops[static_cast<std::size_t>(i)].attrs;
    a.heads = 8, a.kv_heads = kv_heads[i], a.batch = batch[i], a.seq_q = 1;
    host.push_back(20e-6 + 8e-6 * kernel_launches(g.ops[static_cast<std::size_t>(i)]));
  }
  CHECK(kernel_launches(g.ops[0]) == 1);
  CHECK(kernel_launches(g.ops[1]) == 4);
  CHECK(kernel_launches(g.ops[2]) == 8);
  host.push_back(14e-6);  // one GEMM: a single count, the median per kernel
  const std::vector<double> graph = {5e-6, 5e-6, 5e-6, 30e-6};
  const DispatchFit fit = fit_dispatch({{g, graph, graph, host}}, 1e-6);
  CHECK(fit.by_kind.at(OpKind::attn_scores) == approx(8e-6));
  CHECK(fit.fixed_by_kind.at(OpKind::attn_scores) == approx(20e-6));
  CHECK(fit.by_kind.at(OpKind::gemm) == approx(14e-6));
  CHECK(fit.fixed_by_kind.count(OpKind::gemm) == 0);

  // The cost model charges the host fixed + per kernel × kernels for each op.
  Hardware hw;
  hw.dispatch_by_kind = fit.by_kind;
  hw.dispatch_fixed_by_kind = fit.fixed_by_kind;
  CHECK(hw.dispatch_fixed(OpKind::attn_scores) + hw.dispatch(OpKind::attn_scores) * kernel_launches(g.ops[2]) ==
        approx(84e-6));
  CHECK(hw.dispatch_fixed(OpKind::rmsnorm) == 0.0);
}

TEST_CASE("calibrate: the queued cost is per kernel launched, so an op of four kernels pays it four times") {
  Graph a = chain_of({OpKind::rmsnorm, OpKind::adamw, OpKind::residual_add, OpKind::adamw, OpKind::gemm});
  for (Op& op : a.ops)
    if (op.kind == OpKind::adamw) op.attrs.passes = 4;  // unfused: four sweeps
  const std::vector<double> graph = {3e-6, 9e-6, 1.5e-6, 12e-6, 40e-6};
  EagerCase c{a, graph, graph, {}};
  const double queued = 0.6e-6;
  for (std::size_t i = 0; i < graph.size(); ++i) c.held_medians.push_back(graph[i] + queued * kernel_launches(a.ops[i]));
  // Paced eager times are not what this checks: the held times alone fix the queued cost.
  const DispatchFit fit = fit_dispatch({c}, 1e-6);
  CHECK(fit.launch_eager - 1e-6 == approx(queued).epsilon(0.065));
}
