// A serving run in the trace: a process per stack step with a span per engine step, the load
// counters, and each served request as nested async slices whose begins and ends pair up.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "approx.hpp"
#include "core/report/trace.hpp"
#include "core/serve/simulate.hpp"
#include "core/serve/traffic.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;
using json = nlohmann::json;

namespace {

ServeSpec traffic(int64_t requests, double rate) {
  ServeSpec spec;
  spec.requests = requests;
  spec.seed = 3;
  spec.arrivals.kind = ArrivalKind::poisson;
  spec.arrivals.rate = rate;
  spec.prompt.dist = LengthDist::uniform;
  spec.prompt.min = 8;
  spec.prompt.max = 48;
  spec.prompt.mean = 28;
  spec.output.dist = LengthDist::uniform;
  spec.output.min = 1;
  spec.output.max = 12;
  spec.output.mean = 6;
  return spec;
}

std::vector<StackStep> stack() {
  return {StackStep{"static",
                    {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"scheduler", std::nullopt, "static"},
                     PassSpec{"max_batch", 4}},
                    ""},
          StackStep{"+continuous", {PassSpec{"scheduler", std::nullopt, "continuous"}, PassSpec{"paged_kv"}}, ""}};
}

// Both stack steps of tiny-llama on the test H100 for `spec`'s requests.
RunResult serve_run(const ServeSpec& spec, const std::string& scenario) {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  const std::vector<Request> requests = make_requests(spec, m.max_seq);
  const std::vector<StackStep> steps = stack();
  RunResult r;
  r.scenario = scenario;
  r.model = m.name;
  r.backend = "none";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    ServeStepResult s;
    s.step = steps[i].name;
    s.hardware = hw.name;
    s.predicted = predict_serving(m, hw, spec, requests, steps, i);
    r.serve.push_back(std::move(s));
  }
  return r;
}

const RunResult& small_run() {
  static const RunResult r = serve_run(traffic(40, 200), "serve_tiny");
  return r;
}

// A non-serving run before it: its process comes first and the serve pids follow it.
RunResult plain_run() {
  RunResult r;
  r.scenario = "plain";
  StepResult s;
  s.step = "fp32";
  s.predicted.hardware = "test-h100";
  s.predicted.step_time = 1e-3;
  r.steps.push_back(s);
  return r;
}

std::map<int, std::string> process_names(const json& events) {
  std::map<int, std::string> out;
  for (const json& e : events)
    if (e["ph"] == "M" && e["name"] == "process_name") out[e["pid"].get<int>()] = e["args"]["name"];
  return out;
}

int pid_named(const json& events, const std::string& name) {
  for (const auto& [pid, n] : process_names(events))
    if (n == name) return pid;
  FAIL("no process named ", name);
  return -1;
}

std::vector<json> of(const json& events, int pid, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : events)
    if (e["pid"] == pid && e["ph"] == ph) out.push_back(e);
  return out;
}

std::vector<const RequestRecord*> served(const EngineRun& run) {
  std::vector<const RequestRecord*> out;
  for (const RequestRecord& q : run.requests)
    if (q.rejected.empty()) out.push_back(&q);
  return out;
}

// Every async slice of `pid` by request id: begins and ends pair up in order (a stack per id,
// names matching), each ends no earlier than it began; returns id -> [(name, begin, end, args)].
struct Slice {
  std::string name;
  double begin = 0, end = 0;
  json args;
};
std::map<std::string, std::vector<Slice>> slices_of(const json& events, int pid) {
  std::map<std::string, std::vector<Slice>> done;
  std::map<std::string, std::vector<Slice>> open;
  for (const json& e : events) {
    if (e["pid"] != pid || (e["ph"] != "b" && e["ph"] != "e")) continue;
    CHECK(e["cat"] == "request");
    REQUIRE(e.contains("id2"));
    const std::string id = e["id2"]["local"];
    if (e["ph"] == "b") {
      open[id].push_back({e["name"], e["ts"].get<double>(), 0, e.value("args", json::object())});
      continue;
    }
    REQUIRE_MESSAGE(!open[id].empty(), "an end without a begin: ", e.dump());
    Slice s = open[id].back();
    open[id].pop_back();
    CHECK(s.name == e["name"].get<std::string>());
    s.end = e["ts"].get<double>();
    CHECK(s.end >= s.begin);
    done[id].push_back(s);
  }
  for (const auto& entry : open) CHECK_MESSAGE(entry.second.empty(), "unended slices of request ", entry.first);
  return done;
}

}  // namespace

TEST_CASE("serve trace: a process per stack step after the run's other processes, pids unique") {
  const json doc = json::parse(format_trace({plain_run(), small_run()}));
  const json& events = doc["traceEvents"];
  const std::map<int, std::string> names = process_names(events);
  REQUIRE(names.size() == 3);
  CHECK(names.at(1) == "predicted · plain / fp32 (test-h100)");
  CHECK(names.at(2) == "serve · serve_tiny / static (predicted, test-h100)");
  CHECK(names.at(3) == "serve · serve_tiny / +continuous (predicted, test-h100)");
  for (int pid : {2, 3}) {
    std::map<int, std::string> threads;
    for (const json& e : events)
      if (e["pid"] == pid && e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"]] = e["args"]["name"];
    CHECK(threads == std::map<int, std::string>{{0, "engine steps"}, {1, "requests"}});
  }
  CHECK(doc["otherData"].contains("serve"));
  // A trace without serving runs says nothing of them.
  CHECK_FALSE(json::parse(format_trace({plain_run()}))["otherData"].contains("serve"));
  // The same runs, the same bytes.
  CHECK(format_trace({plain_run(), small_run()}) == format_trace({plain_run(), small_run()}));
}

TEST_CASE("serve trace: one span per engine step with its figures") {
  const json events = json::parse(format_trace({small_run()}))["traceEvents"];
  for (const ServeStepResult& s : small_run().serve) {
    const int pid = pid_named(events, "serve · serve_tiny / " + s.step + " (predicted, test-h100)");
    const std::vector<StepRecord>& steps = s.predicted.run.steps;
    const std::vector<json> spans = of(events, pid, "X");
    REQUIRE(!steps.empty());
    REQUIRE(spans.size() == steps.size());
    CHECK(static_cast<int64_t>(spans.size()) == s.predicted.metrics.steps);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const json& e = spans[i];
      CHECK(e["cat"] == "engine");
      CHECK(e["tid"] == 0);
      CHECK(e["name"] == std::to_string(steps[i].seqs) + " seqs · " + std::to_string(steps[i].tokens) + " tok");
      CHECK(e["ts"].get<double>() == approx(steps[i].start * 1e6).epsilon(1e-6));
      CHECK(e["dur"].get<double>() == approx(steps[i].duration * 1e6).epsilon(1e-6));
      const json& a = e["args"];
      CHECK(a["seqs"] == steps[i].seqs);
      CHECK(a["tokens"] == steps[i].tokens);
      CHECK(a["prefill_tokens"] == steps[i].prefill_tokens);
      CHECK(a["decodes"] == steps[i].decodes);
      CHECK(a["waiting"] == steps[i].waiting);
      CHECK(a["kv_used_blocks"] == steps[i].kv_used_blocks);
    }
  }
}

TEST_CASE("serve trace: counters of batch, tokens per step, KV used and waiting requests") {
  const json events = json::parse(format_trace({small_run()}))["traceEvents"];
  for (const ServeStepResult& s : small_run().serve) {
    const int pid = pid_named(events, "serve · serve_tiny / " + s.step + " (predicted, test-h100)");
    const EngineRun& run = s.predicted.run;
    std::map<std::string, std::vector<json>> counters;
    for (const json& e : of(events, pid, "C")) counters[e["name"]].push_back(e);
    REQUIRE(counters.size() == 4);
    const std::map<std::string, std::string> series = {
        {"batch", "sequences"}, {"tokens", "per step"}, {"KV blocks", "used %"}, {"waiting", "requests"}};
    for (const auto& entry : series) {
      const std::string& name = entry.first;  // plain locals: doctest's macros capture them
      const std::string& key = entry.second;
      REQUIRE_MESSAGE(counters.count(name) == 1, name);
      double last_ts = -1;
      for (const json& e : counters[name]) {
        REQUIRE(e["args"].contains(key));
        CHECK(e["ts"].get<double>() >= last_ts);
        last_ts = e["ts"].get<double>();
      }
    }
    // The first samples are the first step's; the batch's largest is the largest step's; the
    // KV samples peak at the run's highest use of the pool; an idle engine runs no batch.
    CHECK(counters["batch"].front()["args"]["sequences"] == run.steps.front().seqs);
    CHECK(counters["tokens"].front()["args"]["per step"] == run.steps.front().tokens);
    CHECK(counters["waiting"].front()["args"]["requests"] == run.steps.front().waiting);
    int max_batch = 0, max_seqs = 0;
    for (const json& e : counters["batch"]) max_batch = std::max(max_batch, e["args"]["sequences"].get<int>());
    for (const StepRecord& st : run.steps) max_seqs = std::max(max_seqs, static_cast<int>(st.seqs));
    CHECK(max_batch == max_seqs);
    double kv_max = 0;
    for (const json& e : counters["KV blocks"]) {
      const double v = e["args"]["used %"].get<double>();
      CHECK(v >= 0);
      CHECK(v <= 100);
      kv_max = std::max(kv_max, v);
    }
    CHECK(kv_max == approx(100 * s.predicted.metrics.kv_utilization_max).epsilon(1e-3));
    CHECK(counters["batch"].back()["args"]["sequences"] == 0);
    CHECK(counters["batch"].back()["ts"].get<double>() ==
          approx((run.steps.back().start + run.steps.back().duration) * 1e6).epsilon(1e-6));
  }
}

TEST_CASE("serve trace: every served request as nested async slices, begins and ends paired") {
  const json events = json::parse(format_trace({small_run()}))["traceEvents"];
  for (const ServeStepResult& s : small_run().serve) {
    const int pid = pid_named(events, "serve · serve_tiny / " + s.step + " (predicted, test-h100)");
    const std::vector<const RequestRecord*> requests = served(s.predicted.run);
    REQUIRE(requests.size() == 40);
    const std::map<std::string, std::vector<Slice>> slices = slices_of(events, pid);
    REQUIRE(slices.size() == requests.size());
    for (const RequestRecord* q : requests) {
      const std::string id = "0x" + fmt::format("{:x}", q->request.id);
      REQUIRE(slices.count(id) == 1);
      std::map<std::string, Slice> by_name;
      for (const Slice& sl : slices.at(id)) by_name[sl.name] = sl;
      REQUIRE(by_name.size() == 4);
      const std::string whole = "request " + std::to_string(q->request.id);
      REQUIRE(by_name.count(whole) == 1);
      const auto at = [](double seconds) { return approx(seconds * 1e6).epsilon(1e-6); };
      CHECK(by_name[whole].begin == at(q->request.arrival));
      CHECK(by_name[whole].end == at(q->finished));
      CHECK(by_name["queued"].begin == at(q->request.arrival));
      CHECK(by_name["queued"].end == at(q->admitted));
      CHECK(by_name["prefill"].begin == at(q->admitted));
      CHECK(by_name["prefill"].end == at(q->first_token));
      CHECK(by_name["decode"].begin == at(q->first_token));
      CHECK(by_name["decode"].end == at(q->finished));
      for (const char* phase : {"queued", "prefill", "decode"}) {
        const json& a = by_name[phase].args;
        CHECK(a["prompt"] == q->request.prompt);
        CHECK(a["output"] == q->generated);
        CHECK(a["preemptions"] == q->preemptions);
      }
    }
  }
}

TEST_CASE("serve trace: more than 1,000 requests: the first 1,000 and the engine steps up to their end") {
  const RunResult r = serve_run(traffic(1200, 2000), "serve_many");
  const json events = json::parse(format_trace({r}))["traceEvents"];
  for (const ServeStepResult& s : r.serve) {
    const int pid =
        pid_named(events, "serve · serve_many / " + s.step + " (predicted, test-h100; first 1,000 of 1,200 requests)");
    const std::vector<const RequestRecord*> requests = served(s.predicted.run);
    REQUIRE(requests.size() == 1200);
    const std::map<std::string, std::vector<Slice>> slices = slices_of(events, pid);
    CHECK(slices.size() == serve_trace_requests);
    CHECK(slices.count("0x0") == 1);
    CHECK(slices.count(fmt::format("0x{:x}", serve_trace_requests - 1)) == 1);
    CHECK(slices.count(fmt::format("0x{:x}", serve_trace_requests)) == 0);
    double end = 0;
    for (std::size_t i = 0; i < serve_trace_requests; ++i) end = std::max(end, requests[i]->finished);
    std::size_t within = 0;
    for (const StepRecord& st : s.predicted.run.steps) within += st.start < end ? 1 : 0;
    CHECK(within < s.predicted.run.steps.size());
    CHECK(of(events, pid, "X").size() == within);
  }
}

TEST_CASE("serve trace: a disaggregated request's prefill, KV transfer and decode queue; a process per engine") {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  const ServeSpec spec = traffic(12, 100);
  const std::vector<Request> requests = make_requests(spec, m.max_seq);
  const std::vector<StackStep> steps = {
      StackStep{"1P1D",
                {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"paged_kv"}, PassSpec{"prefill_engines", 1.0},
                 PassSpec{"decode_engines", 1.0}},
                ""}};
  RunResult r;
  r.scenario = "pd";
  r.backend = "none";
  ServeStepResult s;
  s.step = "1P1D";
  s.hardware = hw.name;
  s.predicted = predict_serving(m, hw, spec, requests, steps, 0);
  REQUIRE(s.predicted.transfers);
  r.serve.push_back(s);
  const json events = json::parse(format_trace({r}))["traceEvents"];
  const int pid = pid_named(events, "serve · pd / 1P1D (predicted, test-h100)");
  (void)pid_named(events, "serve · pd / 1P1D (predicted, test-h100, replica 0 (prefill))");
  (void)pid_named(events, "serve · pd / 1P1D (predicted, test-h100, replica 1 (decode))");
  const auto slices = slices_of(events, pid);
  const KvTransfers& t = *s.predicted.transfers;
  int checked = 0;
  for (const RequestRecord* q : served(s.predicted.run)) {
    const auto id = static_cast<std::size_t>(q->request.id);
    const auto& list = slices.at(fmt::format("0x{:x}", q->request.id));
    auto find = [&](const std::string& name) {
      const auto it = std::find_if(list.begin(), list.end(), [&](const Slice& x) { return x.name == name; });
      REQUIRE(it != list.end());
      return *it;
    };
    // The transfer runs from the prefill's end for its exposed seconds; the decode queue then
    // lasts to the decode engine's first token.
    const Slice kv = find("KV transfer");
    CHECK(kv.begin == approx(t.prefilled[id] * 1e6).epsilon(1e-6));
    CHECK(kv.end - kv.begin == approx(t.exposed[id] * 1e6).epsilon(1e-3));
    CHECK(find("prefill").end == approx(kv.begin).epsilon(1e-9));
    CHECK(find("decode queue").begin == approx(kv.end).epsilon(1e-9));
    CHECK(find("decode queue").end == approx(q->first_token * 1e6).epsilon(1e-6));
    ++checked;
  }
  CHECK(checked == 12);
}
