// Pipeline schedules: the passes each stage runs and their order (GPipe, 1F1B, Megatron's
// interleaved 1F1B), and the event simulation against the closed forms of Narayanan et al. 2021
// (§2.2: the bubble of GPipe and 1F1B, of the interleaved schedule, the activations each stage
// holds) and against timelines worked out by hand (p2p transfers, uneven stages).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "approx.hpp"
#include "core/cost/formulas.hpp"
#include "core/errors.hpp"
#include "core/parallel/pipeline_schedule.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

constexpr auto gpipe = PipelineSchedule::gpipe;
constexpr auto one_f_one_b = PipelineSchedule::one_f_one_b;
constexpr auto interleaved = PipelineSchedule::interleaved;

// Every chunk of every stage takes f forward and b backward.
PipelineTimes uniform(int p, int v, double f, double b, double send = 0) {
  PipelineTimes t;
  t.forward.assign(p, std::vector<double>(v, f));
  t.backward.assign(p, std::vector<double>(v, b));
  t.send_forward = t.send_backward = send;
  return t;
}

PipelineSlot F(int mb, int chunk = 0) { return {PassKind::forward, mb, chunk}; }
PipelineSlot B(int mb, int chunk = 0) { return {PassKind::backward, mb, chunk}; }

// Each (micro-batch, chunk) forward once and backward once, the forward first.
void check_each_pass_once(const std::vector<PipelineSlot>& order, int m, int v) {
  REQUIRE(order.size() == static_cast<size_t>(2 * m * v));
  std::vector<int> state(static_cast<size_t>(m * v), 0);
  for (const PipelineSlot& s : order) {
    REQUIRE(s.micro_batch >= 0);
    REQUIRE(s.micro_batch < m);
    REQUIRE(s.chunk >= 0);
    REQUIRE(s.chunk < v);
    int& st = state[static_cast<size_t>(s.micro_batch * v + s.chunk)];
    CHECK(st == (s.kind == PassKind::forward ? 0 : 1));
    ++st;
  }
  for (int st : state) CHECK(st == 2);
}

}  // namespace

TEST_CASE("pipeline schedule: every order runs each pass once, forward before backward") {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 5, 8, 16, 24}) {
      for (int stage = 0; stage < p; ++stage) {
        check_each_pass_once(pipeline_order(gpipe, p, m, 1, stage), m, 1);
        check_each_pass_once(pipeline_order(one_f_one_b, p, m, 1, stage), m, 1);
      }
      if (m % p != 0) continue;
      for (int v : {1, 2, 3, 4})
        for (int stage = 0; stage < p; ++stage) check_each_pass_once(pipeline_order(interleaved, p, m, v, stage), m, v);
    }
}

TEST_CASE("pipeline schedule: the orders of GPipe, 1F1B and interleaved 1F1B") {
  using V = std::vector<PipelineSlot>;
  // GPipe (Narayanan et al. 2021, Figure 3): all forwards, then all backwards.
  CHECK(pipeline_order(gpipe, 2, 3, 1, 1) == V{F(0), F(1), F(2), B(0), B(1), B(2)});
  // 1F1B, p = 2, m = 3: stage 0 warms up with p − 0 − 1 = 1 forward, the last stage with none.
  CHECK(pipeline_order(one_f_one_b, 2, 3, 1, 0) == V{F(0), F(1), B(0), F(2), B(1), B(2)});
  CHECK(pipeline_order(one_f_one_b, 2, 3, 1, 1) == V{F(0), B(0), F(1), B(1), F(2), B(2)});
  // Fewer micro-batches than stages: the warm-up is capped at m.
  CHECK(pipeline_order(one_f_one_b, 4, 2, 1, 0) == V{F(0), F(1), B(0), B(1)});
  // Interleaved, p = 2, m = 4, v = 2, stage 0: warm-up (2 − 0 − 1)·2 + (2 − 1)·2 = 4 forwards,
  // chunk 0 then chunk 1 of micro-batches 0, 1; the next group (2, 3) the same; backwards walk
  // the chunks from the last.
  CHECK(pipeline_order(interleaved, 2, 4, 2, 0) ==
        V{F(0, 0), F(1, 0), F(0, 1), F(1, 1),                          // warm-up
          F(2, 0), B(0, 1), F(3, 0), B(1, 1), F(2, 1), B(0, 0), F(3, 1), B(1, 0),  // 1F1B
          B(2, 1), B(3, 1), B(2, 0), B(3, 0)});                        // cool-down
  // Stage 1 (the last): warm-up (v − 1)·p = 2.
  CHECK(pipeline_order(interleaved, 2, 4, 2, 1) ==
        V{F(0, 0), F(1, 0),
          F(0, 1), B(0, 1), F(1, 1), B(1, 1), F(2, 0), B(0, 0), F(3, 0), B(1, 0), F(2, 1), B(2, 1), F(3, 1), B(3, 1),
          B(2, 0), B(3, 0)});
  // m == p: Megatron runs every forward first.
  CHECK(pipeline_order(interleaved, 2, 2, 2, 1) == V{F(0, 0), F(1, 0), F(0, 1), F(1, 1), B(0, 1), B(1, 1), B(0, 0), B(1, 0)});
  // One chunk: the interleaved schedule is 1F1B.
  CHECK(pipeline_order(interleaved, 4, 8, 1, 1) == pipeline_order(one_f_one_b, 4, 8, 1, 1));
}

TEST_CASE("pipeline schedule: uniform GPipe and 1F1B take (m + p − 1)(f + b), bubble (p − 1)/(m + p − 1)") {
  // Narayanan et al. 2021, §2.2.1: each stage idles p − 1 forward-and-backward slots of m + p − 1.
  const double f = 1, b = 2;
  for (auto s : {gpipe, one_f_one_b})
    for (const auto& pm : std::vector<std::pair<int, int>>{{4, 8}, {2, 2}, {8, 32}, {4, 1}, {1, 5}, {16, 64}}) {
      const int p = pm.first, m = pm.second;  // plain names: doctest's CAPTURE cannot take bindings
      CAPTURE(name_of(s));
      CAPTURE(p);
      CAPTURE(m);
      const PipelineRun r = simulate_pipeline(s, p, m, 1, uniform(p, 1, f, b));
      CHECK(r.makespan == approx((m + p - 1) * (f + b)));
      CHECK(r.bubble_fraction == doctest::Approx(formulas::pipeline_bubble_fraction(p, m)).epsilon(1e-12));
      REQUIRE(r.busy.size() == static_cast<size_t>(p));
      for (int st = 0; st < p; ++st) {
        CHECK(r.busy[st] == approx(m * (f + b)));
        CHECK(r.idle[st] == doctest::Approx((p - 1) * (f + b)).epsilon(1e-12));
      }
    }
}

TEST_CASE("pipeline schedule: interleaved bubble time over ideal time is (p − 1)/(v·m)") {
  // Narayanan et al. 2021, §2.2.2: v chunks of f/v and b/v shrink the bubble v times, so the step
  // takes m(f + b) + (p − 1)(f + b)/v.
  const double f = 1.0, b = 2.0;
  for (const auto& pmv : std::vector<std::tuple<int, int, int>>{{4, 8, 2}, {4, 8, 4}, {2, 4, 2}, {8, 16, 2}, {4, 16, 3}}) {
    const int p = std::get<0>(pmv), m = std::get<1>(pmv), v = std::get<2>(pmv);
    CAPTURE(p);
    CAPTURE(m);
    CAPTURE(v);
    const PipelineRun r = simulate_pipeline(interleaved, p, m, v, uniform(p, v, f / v, b / v));
    CHECK(r.makespan == approx(m * (f + b) + (p - 1) * (f + b) / v).epsilon(1e-12));
    CHECK(r.bubble_ratio == approx(formulas::interleaved_bubble_ratio(p, m, v)).epsilon(1e-12));
  }
  // p = 4, m = 8, v = 2 by hand: 24 s of compute per stage, 3·3/2 = 4.5 s of bubble, 3/16.
  const PipelineRun r = simulate_pipeline(interleaved, 4, 8, 2, uniform(4, 2, 0.5, 1.0));
  CHECK(r.makespan == approx(28.5));
  CHECK(r.bubble_ratio == approx(3.0 / 16.0));
  CHECK(r.bubble_fraction == approx(4.5 / 28.5));
  // Against 1F1B with the same stages whole: (p − 1)/m = 3/8, twice the bubble.
  CHECK(simulate_pipeline(one_f_one_b, 4, 8, 1, uniform(4, 1, 1.0, 2.0)).bubble_ratio == approx(3.0 / 8.0));
}

TEST_CASE("pipeline schedule: peak in-flight micro-batches per stage") {
  const PipelineTimes t4 = uniform(4, 1, 1, 2);
  // 1F1B (§2.2.1): stage s holds p − s micro-batches, never more than m.
  CHECK(simulate_pipeline(one_f_one_b, 4, 8, 1, t4).peak_in_flight == std::vector<int>{4, 3, 2, 1});
  CHECK(simulate_pipeline(one_f_one_b, 4, 2, 1, t4).peak_in_flight == std::vector<int>{2, 2, 2, 1});
  // GPipe holds every micro-batch on every stage.
  CHECK(simulate_pipeline(gpipe, 4, 8, 1, t4).peak_in_flight == std::vector<int>{8, 8, 8, 8});
  // Interleaved, p = 4, v = 2, m = 8: Megatron's warm-up (p − s − 1)·2 + (v − 1)·p forwards, then
  // the steady state's first forward before its first backward: 11, 9, 7, 5 chunks of a
  // micro-batch (each 1/v of the stage's activations).
  CHECK(simulate_pipeline(interleaved, 4, 8, 2, uniform(4, 2, 0.5, 1)).peak_in_flight ==
        std::vector<int>{11, 9, 7, 5});
  // m = 4 = p: every forward first, all m·v chunks held.
  CHECK(simulate_pipeline(interleaved, 4, 4, 2, uniform(4, 2, 0.5, 1)).peak_in_flight ==
        std::vector<int>{8, 8, 8, 8});
  // The warm-up capped at m·v: p = 4, m = 8, v = 4 gives 6 + 12 + 1 = 19 on stage 0, within 32.
  CHECK(simulate_pipeline(interleaved, 4, 8, 4, uniform(4, 4, 0.25, 0.5)).peak_in_flight[0] == 19);
}

TEST_CASE("pipeline schedule: a p2p transfer delays the receiver") {
  // 1F1B, p = 2, m = 2, forward f, backward b, transfer c. Stage 0 runs F0 F1 B0 B1, stage 1
  // F0 B0 F1 B1:
  //   stage 0  F0 [0, f]          F1 [f, 2f]
  //   stage 1  F0 [f + c, 2f + c]  B0 [2f + c, 2f + b + c]  F1 [2f + b + c, 3f + b + c]
  //            B1 [3f + b + c, 3f + 2b + c]
  //   stage 0  B0 [2f + b + 2c, 2f + 2b + 2c]  B1 [3f + 2b + 2c, 3f + 3b + 2c]
  // so the step takes 3(f + b) + 2c: one transfer each way on the critical path.
  const double f = 1, b = 2, c = 0.25;
  const PipelineRun r = simulate_pipeline(one_f_one_b, 2, 2, 1, uniform(2, 1, f, b, c), true);
  CHECK(r.makespan == approx(3 * (f + b) + 2 * c));
  CHECK(r.busy == std::vector<double>{2 * (f + b), 2 * (f + b)});
  REQUIRE(r.events.size() == 8);
  const std::vector<std::tuple<int, PipelineSlot, double, double>> want = {
      {0, F(0), 0, f},
      {0, F(1), f, 2 * f},
      {0, B(0), 2 * f + b + 2 * c, 2 * f + 2 * b + 2 * c},
      {0, B(1), 3 * f + 2 * b + 2 * c, 3 * f + 3 * b + 2 * c},
      {1, F(0), f + c, 2 * f + c},
      {1, B(0), 2 * f + c, 2 * f + b + c},
      {1, F(1), 2 * f + b + c, 3 * f + b + c},
      {1, B(1), 3 * f + b + c, 3 * f + 2 * b + c},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(r.events[i].stage == std::get<0>(want[i]));
    CHECK(r.events[i].slot == std::get<1>(want[i]));
    CHECK(r.events[i].start == approx(std::get<2>(want[i])));
    CHECK(r.events[i].end == approx(std::get<3>(want[i])));
  }
  // Events are built only when asked for.
  CHECK(simulate_pipeline(one_f_one_b, 2, 2, 1, uniform(2, 1, f, b, c)).events.empty());
  // One stage sends nothing.
  CHECK(simulate_pipeline(one_f_one_b, 1, 4, 1, uniform(1, 1, f, b, c)).makespan == approx(4 * (f + b)));
}

TEST_CASE("pipeline schedule: an uneven pipeline follows its slowest stage") {
  // 1F1B, p = 2, m = 3; the fast stage takes f = 1, b = 2, the slow one F = 4, B = 8 (F ≥ f + b,
  // B ≥ f + b). Orders: stage 0 F0 F1 B0 F2 B1 B2, stage 1 F0 B0 F1 B1 F2 B2.
  PipelineTimes t;
  t.backward = {{2}, {8}};
  t.forward = {{1}, {4}};
  // Slow last stage: it starts after the fast stage's first forward, then never waits (each
  // input is ready before it is free); the fast stage's last backward comes after it:
  // makespan f + m(F + B) + b = 1 + 36 + 2 = 39.
  PipelineRun r = simulate_pipeline(one_f_one_b, 2, 3, 1, t);
  CHECK(r.makespan == approx(39.0));
  CHECK(r.busy == std::vector<double>{9.0, 36.0});
  CHECK(r.idle[1] == approx(3.0));
  CHECK(r.bubble_fraction == approx(3.0 / 39.0));
  // Slow first stage: stage 0 F0 [0, 4] F1 [4, 8] B0 [8, 16] (stage 1's B0 ended at 7) F2 [16, 20]
  // B1 [20, 28] (stage 1's B1 ended at 11) B2 [28, 36] (stage 1 ran F2 [20, 21], B2 [21, 23]):
  // the slow stage never idles, makespan m(F + B) = 36.
  t.forward = {{4}, {1}};
  t.backward = {{8}, {2}};
  r = simulate_pipeline(one_f_one_b, 2, 3, 1, t);
  CHECK(r.makespan == approx(36.0));
  CHECK(r.idle[0] == approx(0.0));
  CHECK(r.bubble_fraction == approx(0.0));
  // GPipe with the slow stage last: stage 1 runs its three forwards back to back from f, then
  // its backwards; stage 0's backwards follow each of stage 1's: f + m(F + B) + b again.
  t.forward = {{1}, {4}};
  t.backward = {{2}, {8}};
  CHECK(simulate_pipeline(gpipe, 2, 3, 1, t).makespan == approx(39.0));
}

TEST_CASE("pipeline schedule: every schedule finishes on uneven stages and transfers") {
  // Stage and chunk times that differ everywhere, transfers on: no order deadlocks, no stage is
  // busier than the step, and explicit orders give the same run.
  for (auto s : {gpipe, one_f_one_b, interleaved})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 4, 8, 12, 16})
        for (int v : {1, 2, 3}) {
          if (s != interleaved && v != 1) continue;
          if (s == interleaved && m % p != 0) continue;
          PipelineTimes t;
          for (int st = 0; st < p; ++st) {
            t.forward.emplace_back();
            t.backward.emplace_back();
            for (int c = 0; c < v; ++c) {
              t.forward.back().push_back(1.0 + 0.3 * ((st * 7 + c * 3) % 5));
              t.backward.back().push_back(2.0 + 0.5 * ((st * 5 + c) % 3));
            }
          }
          t.send_forward = 0.2;
          t.send_backward = 0.3;
          CAPTURE(name_of(s));
          CAPTURE(p);
          CAPTURE(m);
          CAPTURE(v);
          const PipelineRun r = simulate_pipeline(s, p, m, v, t, true);
          CHECK(r.events.size() == static_cast<size_t>(2 * p * m * v));
          for (int st = 0; st < p; ++st) CHECK(r.busy[st] <= r.makespan * (1 + 1e-12));
          CHECK(r.bubble_fraction >= 0);
          CHECK(r.bubble_fraction < 1);
          // A stage's passes never overlap.
          for (size_t i = 1; i < r.events.size(); ++i)
            if (r.events[i].stage == r.events[i - 1].stage) CHECK(r.events[i].start >= r.events[i - 1].end);
          std::vector<std::vector<PipelineSlot>> orders;
          for (int st = 0; st < p; ++st) orders.push_back(pipeline_order(s, p, m, v, st));
          CHECK(simulate_pipeline_orders(orders, m, v, t).makespan == approx(r.makespan));
        }
}

TEST_CASE("pipeline schedule: a deadlocked or malformed order throws logic_error") {
  // Stage 0 waits for B0 before it sends F1; stage 1 runs F1 before B0.
  const std::vector<std::vector<PipelineSlot>> deadlock = {{F(0), B(0), F(1), B(1)}, {F(1), B(1), F(0), B(0)}};
  CHECK_THROWS_WITH_AS((void)simulate_pipeline_orders(deadlock, 2, 1, uniform(2, 1, 1, 2)),
                       doctest::Contains("pipeline order deadlocks: stage 0 waits at its pass 1 (backward of "
                                         "micro-batch 0, chunk 0)"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS((void)simulate_pipeline_orders({{F(0), B(0), B(1), F(1)}, {F(0), B(0), F(1), B(1)}}, 2, 1,
                                                      uniform(2, 1, 1, 2)),
                       doctest::Contains("backward of micro-batch 1 chunk 0 runs before its forward"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS((void)simulate_pipeline_orders({{F(0), B(0), F(0), B(0)}}, 2, 1, uniform(1, 1, 1, 2)),
                       doctest::Contains("forward of micro-batch 0 chunk 0 runs twice"), std::logic_error);
  CHECK_THROWS_WITH_AS((void)simulate_pipeline_orders({{F(0), B(0)}}, 2, 1, uniform(1, 1, 1, 2)),
                       doctest::Contains("has 2 passes, not 2·m·v = 4"), std::logic_error);
}

TEST_CASE("pipeline schedule: bad inputs throw ConfigError") {
  CHECK_THROWS_WITH_AS((void)pipeline_order(one_f_one_b, 0, 8, 1, 0),
                       "a pipeline needs at least 1 stage, 1 micro-batch and 1 chunk per stage (got p=0, m=8, v=1)",
                       ConfigError);
  CHECK_THROWS_AS((void)pipeline_order(gpipe, 4, 0, 1, 0), ConfigError);
  CHECK_THROWS_AS((void)pipeline_order(interleaved, 4, 8, 0, 0), ConfigError);
  CHECK_THROWS_WITH_AS((void)pipeline_order(one_f_one_b, 4, 8, 1, 4), "pipeline stage 4 is outside 0..3",
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)pipeline_order(gpipe, 4, 8, 2, 0),
                       "the gpipe schedule runs 1 model chunk per stage (got v=2); use the interleaved schedule "
                       "for more",
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)simulate_pipeline(one_f_one_b, 4, 8, 2, uniform(4, 2, 1, 2)),
                       doctest::Contains("the 1f1b schedule runs 1 model chunk per stage"), ConfigError);
  CHECK_THROWS_WITH_AS((void)simulate_pipeline(interleaved, 4, 6, 2, uniform(4, 2, 1, 2)),
                       "the interleaved schedule needs the micro-batches to be a multiple of the stages (got m=6, p=4)",
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)simulate_pipeline(one_f_one_b, 4, 8, 1, uniform(3, 1, 1, 2)),
                       "pipeline times: forward has 3 stages, the pipeline 4", ConfigError);
  CHECK_THROWS_WITH_AS((void)simulate_pipeline(interleaved, 2, 4, 2, uniform(2, 1, 1, 2)),
                       "pipeline times: forward[0] has 1 chunks, the pipeline 2 per stage", ConfigError);
  PipelineTimes t = uniform(2, 1, 1, 2);
  t.backward[1][0] = -1;
  CHECK_THROWS_WITH_AS((void)simulate_pipeline(one_f_one_b, 2, 4, 1, t),
                       "pipeline times: backward[1][0] must be a finite time >= 0 (got -1)", ConfigError);
  t = uniform(2, 1, 1, 2);
  t.send_backward = -0.5;
  CHECK_THROWS_WITH_AS((void)simulate_pipeline(one_f_one_b, 2, 4, 1, t),
                       "pipeline times: send_backward must be a finite time >= 0 (got -0.5)", ConfigError);
  CHECK_THROWS_AS((void)simulate_pipeline_orders({}, 4, 1, uniform(0, 1, 1, 2)), ConfigError);
}
