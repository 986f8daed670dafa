// Collectives on the timeline: they hold their stream only, so compute overlaps them; compute
// in flight beside one runs slower by the SMs it takes; collectives on one stream run one at a
// time; and predict() reports their seconds and the part the step waits for. Hand-sized
// graphs with times in microseconds.
#include <doctest/doctest.h>

#include <vector>

#include "approx.hpp"
#include "core/cost/cost_model.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

int tensor(Graph& g, const char* name, int64_t elements = 1024) {
  Tensor t;
  t.name = name;
  t.shape = {elements};
  t.role = TensorRole::activation;
  return g.add_tensor(std::move(t));
}

int op(Graph& g, const char* name, OpKind kind, std::vector<int> in, std::vector<int> out, int stream = 0) {
  Op o;
  o.name = name;
  o.kind = kind;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.stream = stream;
  if (kind == OpKind::collective) {
    o.attrs.collective = Collective::all_reduce;
    o.attrs.group = 8;
  }
  o.attrs.elements = 1024;
  return g.add_op(o);
}

constexpr double us = 1e-6;

// A (10 µs) writes a gradient, the collective C (8 µs) on stream 1 all-reduces it, B (10 µs)
// computes meanwhile, D (1 µs) reads the reduced gradient.
Graph overlapped() {
  Graph g;
  const int x = tensor(g, "x"), grad = tensor(g, "grad"), y = tensor(g, "y"), out = tensor(g, "out");
  op(g, "A", OpKind::residual_add, {x, x}, {grad});
  op(g, "C", OpKind::collective, {grad}, {grad}, 1);
  op(g, "B", OpKind::residual_add, {x, x}, {y});
  op(g, "D", OpKind::residual_add, {grad, y}, {out});
  return g;
}

}  // namespace

TEST_CASE("timeline: compute overlaps a collective on a side stream") {
  const Graph g = overlapped();
  const std::vector<double> t = {10 * us, 8 * us, 10 * us, 1 * us};
  // A 0-10; C 10-18 beside B 10-20; D after both: 20-21.
  CHECK(timeline_makespan(g, t) == approx(21 * us));
  // B runs at 3/4 speed while C is in flight: 8 µs of C do 6 µs of B's work, the last 4 µs
  // at full speed: B ends at 22, D at 23.
  CHECK(timeline_makespan(g, t, true, {}, 0.25) == approx(23 * us));
  // A collective of no duration slows nothing.
  CHECK(timeline_makespan(g, {10 * us, 0, 10 * us, 1 * us}, true, {}, 0.25) == approx(21 * us));
}

TEST_CASE("timeline: a collective the next op waits for is exposed; one stream runs them in turn") {
  Graph g;
  const int x = tensor(g, "x"), a = tensor(g, "a"), b = tensor(g, "b"), out = tensor(g, "out");
  op(g, "A", OpKind::residual_add, {x, x}, {a});
  op(g, "C1", OpKind::collective, {a}, {a}, 1);
  op(g, "C2", OpKind::collective, {x}, {b}, 1);  // ready at once, waits for C1 on its stream
  op(g, "D", OpKind::residual_add, {a, b}, {out});
  // A 0-10; C1 10-18; C2 18-26; D 26-27.
  CHECK(timeline_makespan(g, {10 * us, 8 * us, 8 * us, 1 * us}) == approx(27 * us));
  // On two streams the two collectives run side by side: D at 18-19.
  g.ops[2].stream = 2;
  CHECK(timeline_makespan(g, {10 * us, 8 * us, 8 * us, 1 * us}) == approx(19 * us));
}

TEST_CASE("predict: communication seconds and the exposed part") {
  Hardware hw;
  hw.name = "test-gpu";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 1e12;
  hw.memory_bandwidth = 1e12;
  hw.nvlink = {100e9, 5 * us};
  hw.gpus_per_node = 8;
  hw.sm_count = 100;
  Graph g = overlapped();
  g.ops[2].attrs.elements = 200'000'000;  // B outlasts the collective
  const Prediction p = predict(g, hw);
  const double c = p.ops[1].time;
  REQUIRE(c > 0);
  CHECK(p.communication_time == approx(c));
  // The collective runs beside B, which outlasts it: nothing of it is exposed.
  REQUIRE(p.ops[2].time > c);
  CHECK(p.exposed_communication == approx(0.0));
  CHECK(p.step_time == approx(p.ops[0].time + p.ops[2].time + p.ops[3].time));
  // With collective_sms = 25 of 100, B runs at 3/4 speed for the collective's c seconds, so c/4
  // of its work is left for after: the step grows by c/4, all of it exposed communication.
  hw.collective_sms = 25;
  CHECK(hw.collective_sm_share() == approx(0.25));
  const Prediction slowed = predict(g, hw);
  CHECK(slowed.step_time == approx(p.step_time + 0.25 * c));
  CHECK(slowed.exposed_communication == approx(0.25 * c));
  // The collective alone, B no longer hiding it: all of it is exposed.
  Graph bare = overlapped();
  const Prediction exposed = predict(bare, hw);
  CHECK(exposed.exposed_communication == approx(exposed.ops[1].time - exposed.ops[2].time).epsilon(1e-6));
  // Without collectives there is nothing to report.
  Graph plain = g;
  plain.ops.erase(plain.ops.begin() + 1);
  for (std::size_t i = 0; i < plain.ops.size(); ++i) plain.ops[i].id = static_cast<int>(i);
  const Prediction none = predict(plain, hw);
  CHECK(none.communication_time == 0);
  CHECK(none.exposed_communication == 0);
}
