// The trace of a run: well-formed Chrome trace events, a predicted and a measured process per
// step, spans that never overlap on one track, and each step's span as long as its reported
// step time.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <utility>

#include "core/cost/cost_model.hpp"
#include "core/parallel/plan.hpp"
#include "core/report/trace.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using namespace perfsim::test_models;

namespace {

// The parallel tests' H100 node, priced as a GPU with host overhead.
Hardware gpu() {
  Hardware hw = h100_node();
  hw.kind = "gpu";
  hw.host_overhead = 20e-6;
  return hw;
}

// A data-parallel rank's training step (gradient buckets on their own stream), predicted, and
// "measured" at 1.1× each predicted op time, as summarize_runs would time it.
StepResult data_parallel_step() {
  ParallelSpec p;
  p.dp = 2;
  Workload w;
  w.phase = Phase::train;
  w.batch = 2;
  w.seq = 64;
  StepResult s;
  s.step = "ddp";
  s.graph = build_rank_graphs(tiny_llama(), w, {StackStep{"bf16", {PassSpec{"bf16", {}}}, ""}}, 0, p).front().graph;
  s.predicted = predict(s.graph, gpu());
  Measurement m;
  m.backend = "cuda";
  std::vector<double> medians;
  for (std::size_t i = 0; i < s.graph.ops.size(); ++i) {
    medians.push_back(1.1 * s.predicted.ops[i].time);
    m.ops.push_back(OpMeasurement{s.graph.ops[i].id, medians.back(), medians.back(), true});
  }
  m.step_time = timeline_makespan(s.graph, medians, true);
  s.measured = m;
  return s;
}

}  // namespace

TEST_CASE("trace: every event well formed, both timelines, spans apart on each track, the step's time") {
  RunResult r;
  r.scenario = "trace_test";
  r.device = "test";
  r.steps.push_back(data_parallel_step());
  const StepResult& s = r.steps.front();
  const auto t = nlohmann::json::parse(format_trace({r}));
  const auto& events = t.at("traceEvents");
  REQUIRE(events.is_array());
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  std::map<int, double> step_span, ops_end;
  int ops = 0;
  for (const auto& e : events) {
    for (const char* key : {"ph", "pid", "tid"}) REQUIRE(e.contains(key));
    const std::string ph = e.at("ph");
    const int pid = e.at("pid"), tid = e.at("tid");
    if (ph == "M") {
      if (e.at("name") == "process_name") processes[pid] = e.at("args").at("name");
      continue;
    }
    REQUIRE(ph == "X");
    REQUIRE(e.contains("ts"));
    const double ts = e.at("ts"), dur = e.at("dur");
    CHECK(ts >= 0);
    CHECK(dur >= 0);
    if (e.at("cat") == "step") {
      if (e.at("name") == s.step) step_span[pid] = dur;
      continue;
    }
    if (tid == 99) continue;  // the host's issue: its own clock
    tracks[{pid, tid}].push_back({ts, ts + dur});
    ops_end[pid] = std::max(ops_end[pid], ts + dur);
    ++ops;
    // Each op carries what it is and both times.
    for (const char* key : {"kind", "dtype", "shape", "flops", "bytes", "bound", "predicted_us", "measured_us"})
      CHECK(e.at("args").contains(key));
  }
  REQUIRE(processes.size() == 2);
  CHECK(processes.at(1).rfind("predicted · trace_test / ddp", 0) == 0);
  CHECK(processes.at(2).rfind("measured · trace_test / ddp", 0) == 0);
  CHECK(ops == 2 * static_cast<int>(s.graph.ops.size()));
  // The data-parallel buckets run on a track of their own beside the main stream's.
  std::set<int> predicted_tracks;
  for (const auto& [key, spans] : tracks)
    if (key.first == 1) predicted_tracks.insert(key.second);
  CHECK(predicted_tracks.size() >= 2);
  // One op at a time on a stream.
  for (auto& [key, spans] : tracks) {
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i].first >= spans[i - 1].second - 1e-6);
  }
  // The step's span is its reported time; the ops end at its timeline's makespan.
  CHECK(step_span.at(1) == doctest::Approx(s.predicted.step_time * 1e6));
  CHECK(ops_end.at(1) == doctest::Approx((s.predicted.step_time - s.predicted.host_time) * 1e6));
  CHECK(step_span.at(2) == doctest::Approx(s.measured->step_time * 1e6));
  CHECK(ops_end.at(2) == doctest::Approx(s.measured->step_time * 1e6));
}

TEST_CASE("trace: a step that was not measured has its predicted process only") {
  RunResult r;
  r.scenario = "predicted_only";
  StepResult s = data_parallel_step();
  s.measured.reset();
  r.steps.push_back(std::move(s));
  const auto t = nlohmann::json::parse(format_trace({r}));
  int processes = 0;
  for (const auto& e : t.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name") ++processes;
  CHECK(processes == 1);
}

TEST_CASE("trace: each rank's run as it happened, a process per rank with its unrolled ops") {
  RunResult r;
  r.scenario = "ranks";
  StepResult s = data_parallel_step();
  s.measured.reset();
  for (int rank = 0; rank < 2; ++rank) {
    RankMeasurement rm;
    rm.rank = rank;
    rm.stage = rank;
    rm.host = "node";
    // A receive that waits for the other rank, then two micro-batches' ops on the main stream.
    rm.timeline = {{"mb0/pipeline.recv", 7, 0.0, 0.004}, {"mb0/layer0.attn", 0, 0.004, 0.006},
                   {"mb1/layer0.attn", 0, 0.006, 0.009}};
    s.rank_measured.push_back(rm);
  }
  r.steps.push_back(std::move(s));
  const auto t = nlohmann::json::parse(format_trace({r}));
  std::map<int, std::string> names;
  std::map<int, int> spans;
  std::map<int, double> step_us;
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") names[e.at("pid")] = e.at("args").at("name");
    if (e.at("ph") != "X") continue;
    if (e.at("cat") == "rank") {
      ++spans[e.at("pid")];
      if (e.at("name") == "mb1/layer0.attn") {
        CHECK(e.at("args").at("micro_batch") == 1);
        CHECK(e.at("ts").get<double>() == doctest::Approx(6000));
        CHECK(e.at("dur").get<double>() == doctest::Approx(3000));
      }
    }
    if (e.at("cat") == "step") step_us[e.at("pid")] = e.at("dur").get<double>();
  }
  REQUIRE(names.size() == 3);  // predicted, rank 0, rank 1
  int ranks = 0;
  for (const auto& [pid, name] : names)
    if (name.find("· rank ") != std::string::npos) {
      ++ranks;
      CHECK(spans[pid] == 3);
      CHECK(step_us[pid] == doctest::Approx(9000));  // the run's end: its last op's
    }
  CHECK(ranks == 2);
}
