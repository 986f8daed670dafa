// The serving outputs of the report: the JSON report's "serve" object, the CSV rows of serving
// runs and the vLLM benchmark JSON, on a small predicted serving run.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "approx.hpp"
#include "core/report/report.hpp"
#include "core/report/serve_csv.hpp"
#include "core/report/serve_json.hpp"
#include "core/run/serve_runner.hpp"
#include "core/serve/simulate.hpp"
#include "core/serve/traffic.hpp"
#include "core/text.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;
using json = nlohmann::json;

namespace {

constexpr int64_t served = 12;  // requests make_requests draws; one more is refused
constexpr int64_t refused_id = 6;

ServeSpec small_traffic() {
  ServeSpec spec;
  spec.requests = served;
  spec.seed = 7;
  spec.arrivals.kind = ArrivalKind::poisson;
  spec.arrivals.rate = 50;
  spec.prompt.mean = 32;
  spec.output.mean = 8;
  spec.slo.ttft = 0.5;
  return spec;
}

std::vector<StackStep> small_stack() {
  return {StackStep{"static",
                    {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"scheduler", std::nullopt, "static"},
                     PassSpec{"max_batch", 4}},
                    ""},
          StackStep{"+continuous", {PassSpec{"scheduler", std::nullopt, "continuous"}, PassSpec{"paged_kv"}}, ""}};
}

// make_requests' requests with one more among them, as request `refused_id`, whose prompt
// exceeds the model's max_seq (refused).
std::vector<Request> small_requests(const ModelConfig& m, const ServeSpec& spec) {
  std::vector<Request> requests = make_requests(spec, m.max_seq);
  Request big;
  big.arrival = requests[refused_id - 1].arrival;
  big.prompt = m.max_seq + 100;
  big.output = 8;
  requests.insert(requests.begin() + refused_id, big);
  for (std::size_t i = 0; i < requests.size(); ++i) requests[i].id = static_cast<int64_t>(i);
  return requests;
}

// Two serve steps of a tiny model on an H100, each with a what-if on a slower GPU and one on a
// GPU too small for a KV cache.
RunResult serve_result() {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  Hardware slow = hw;
  slow.name = "test-h100-half-bandwidth";
  slow.memory_bandwidth /= 2;
  const ServeSpec spec = small_traffic();
  const std::vector<Request> requests = small_requests(m, spec);
  const std::vector<StackStep> stack = small_stack();

  RunResult r;
  r.scenario = "serve_tiny";
  r.model = m.name;
  r.backend = "none";
  r.device = hw.name;
  r.traffic = describe(spec);
  r.workload = r.traffic;
  for (std::size_t i = 0; i < stack.size(); ++i) {
    ServeStepResult s;
    s.step = stack[i].name;
    s.hardware = hw.name;
    s.predicted = predict_serving(m, hw, spec, requests, stack, i);
    s.scheduler = describe(s.predicted.config, m.max_seq);
    s.what_if.push_back({slow.name, predict_serving(m, slow, spec, requests, stack, i).metrics, ""});
    s.what_if.push_back({"test-no-memory", {}, "test-no-memory has no memory size to hold a KV cache in"});
    r.serve.push_back(std::move(s));
  }
  return r;
}

const RunResult& cached_result() {
  static const RunResult r = serve_result();
  return r;
}

double sig6_of(double v) { return sig6(v).get<double>(); }

void check_metrics(const json& j, const ServeMetrics& m) {
  for (const char* key : {"requests",
                          "completed",
                          "rejected",
                          "preemptions",
                          "steps",
                          "input_tokens",
                          "output_tokens",
                          "duration",
                          "request_throughput",
                          "output_throughput",
                          "total_token_throughput",
                          "ttft",
                          "tpot",
                          "itl",
                          "e2e",
                          "queue",
                          "goodput",
                          "slo_attainment",
                          "mean_batch",
                          "mean_step_tokens",
                          "mean_step_time",
                          "kv_utilization_mean",
                          "kv_utilization_max",
                          "prefix_hit_rate"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["requests"] == m.requests);
  CHECK(j["completed"] == m.completed);
  CHECK(j["rejected"] == m.rejected);
  CHECK(j["steps"] == m.steps);
  CHECK(j["output_tokens"] == m.output_tokens);
  CHECK(j["duration"].get<double>() == approx(m.duration).epsilon(1e-5));
  CHECK(j["request_throughput"].get<double>() == approx(m.request_throughput).epsilon(1e-5));
  CHECK(j["goodput"].get<double>() == approx(m.goodput).epsilon(1e-5));
  CHECK(j["kv_utilization_mean"].get<double>() == approx(m.kv_utilization_mean).epsilon(1e-5));
  for (const auto& figure : {std::pair<const char*, const LatencyStats*>{"ttft", &m.ttft},
                             {"tpot", &m.tpot},
                             {"itl", &m.itl},
                             {"e2e", &m.e2e},
                             {"queue", &m.queue}}) {
    const char* name = figure.first;  // a plain local: doctest's macros capture it
    const LatencyStats* stats = figure.second;
    const json& s = j[name];
    for (const char* key : {"count", "mean", "median", "p90", "p99", "max"}) CHECK_MESSAGE(s.contains(key), name);
    CHECK(s["count"] == stats->count);
    CHECK(s["mean"].get<double>() == sig6_of(stats->mean));
    CHECK(s["p99"].get<double>() == sig6_of(stats->p99));
  }
}

std::vector<std::string> csv_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("serve report: the run has served and refused requests") {
  const RunResult& r = cached_result();
  REQUIRE(r.serve.size() == 2);
  for (const ServeStepResult& s : r.serve) {
    CHECK(s.predicted.metrics.completed == served);
    CHECK(s.predicted.metrics.rejected == 1);
    CHECK(s.predicted.metrics.ttft.mean > 0);
  }
}

TEST_CASE("serve report: sig6 keeps six significant digits") {
  CHECK(sig6(123456789.0).get<double>() == 123457000.0);
  CHECK(sig6(0.000123456789).get<double>() == 0.000123457);
  CHECK(sig6(-2.5).get<double>() == -2.5);
  CHECK(sig6(0).get<double>() == 0.0);
  CHECK(sig6(std::nan("")).is_null());
  CHECK(sig6(INFINITY).is_null());
}

TEST_CASE("serve report: JSON holds every serve key") {
  const RunResult& r = cached_result();
  const json doc = json::parse(format_json({r}));
  const json& point = doc["results"][0];
  CHECK(point["steps"].empty());
  REQUIRE(point.contains("serve"));
  const json& serve = point["serve"];
  CHECK(serve["traffic"] == r.traffic);
  REQUIRE(serve["steps"].size() == r.serve.size());

  for (std::size_t i = 0; i < r.serve.size(); ++i) {
    const ServeStepResult& s = r.serve[i];
    const json& step = serve["steps"][i];
    CHECK(step["step"] == s.step);
    CHECK(step["hardware"] == s.hardware);
    CHECK(step["scheduler"] == s.scheduler);
    CHECK(step["not_executed"] == "");
    CHECK(step["pool"]["blocks"] == s.predicted.pool.blocks);
    CHECK(step["pool"]["block_tokens"] == s.predicted.pool.block);
    CHECK(step["pool"]["block_bytes"].get<double>() == s.predicted.pool.block_bytes);

    const json& predicted = step["predicted"];
    check_metrics(predicted["metrics"], s.predicted.metrics);

    const json& requests = predicted["requests"];
    for (const char* key : {"arrival", "prompt", "output", "ttft", "e2e", "queue", "preemptions"}) {
      REQUIRE_MESSAGE(requests.contains(key), key);
      CHECK_MESSAGE(requests[key].size() == static_cast<std::size_t>(served), key);
    }
    CHECK(requests["rejected"] == json::array({refused_id}));
    REQUIRE(requests["reasons"].size() == 1);
    CHECK(requests["reasons"].begin().value() == 1);
    // Relative to arrival, in id order: the first request's TTFT is its first token less its arrival.
    const RequestRecord& first = s.predicted.run.requests.front();
    CHECK(requests["ttft"][0].get<double>() == sig6_of(first.first_token - first.request.arrival));
    CHECK(requests["arrival"][0].get<double>() == sig6_of(first.request.arrival));
    CHECK(requests["prompt"][0] == first.request.prompt);
    CHECK(requests["output"][0] == first.generated);
    // The refused request is left out: the served one after it follows at its place.
    const RequestRecord& after = s.predicted.run.requests[refused_id + 1];
    CHECK(requests["e2e"][refused_id].get<double>() == sig6_of(after.finished - after.request.arrival));
    CHECK(requests["queue"][refused_id].get<double>() == sig6_of(after.admitted - after.request.arrival));

    const json& timeline = predicted["timeline"];
    const std::size_t points = s.predicted.run.steps.size();  // well under 2,000: every step
    for (const char* key : {"t", "duration", "batch", "tokens", "prefill_tokens", "kv_used", "waiting"}) {
      REQUIRE_MESSAGE(timeline.contains(key), key);
      CHECK_MESSAGE(timeline[key].size() == points, key);
    }
    for (const json& kv : timeline["kv_used"]) {
      CHECK(kv.get<double>() >= 0);
      CHECK(kv.get<double>() <= 1);
    }

    REQUIRE(step["what_if"].size() == 2);
    CHECK(step["what_if"][0]["hardware"] == s.what_if[0].hardware);
    CHECK(step["what_if"][0]["error"] == "");
    check_metrics(step["what_if"][0]["metrics"], s.what_if[0].metrics);
    CHECK(step["what_if"][1]["error"] == s.what_if[1].error);
  }
}

TEST_CASE("serve report: JSON without serve steps has no serve object") {
  RunResult r;
  r.scenario = "plain";
  const json doc = json::parse(format_json({r}));
  CHECK_FALSE(doc["results"][0].contains("serve"));
  CHECK(serve_json(r).is_null());
}

TEST_CASE("serve report: the timeline keeps every k-th of many engine steps") {
  RunResult r;
  r.traffic = "many steps";
  ServeStepResult s;
  s.step = "long";
  s.predicted.run.pool.blocks = 100;
  for (int i = 0; i < 4500; ++i) {
    StepRecord step;
    step.start = i * 0.01;
    step.duration = 0.01;
    step.seqs = i % 7;
    step.kv_used_blocks = i % 100;
    s.predicted.run.steps.push_back(step);
  }
  r.serve.push_back(s);
  const json timeline = json(serve_json(r))["steps"][0]["predicted"]["timeline"];
  // ceil(4,500 / 2,000) = 3: steps 0, 3, 6, ..., 4,497.
  REQUIRE(timeline["t"].size() == 1500);
  CHECK(timeline["t"][1].get<double>() == approx(0.03));
  CHECK(timeline["batch"][1] == 3);
  CHECK(timeline["kv_used"][1].get<double>() == approx(0.03));
  CHECK(timeline["t"].back().get<double>() == approx(44.97));
}

TEST_CASE("serve report: CSV has one row per step and per what-if") {
  RunResult r = cached_result();
  r.sweep_point = {{"requests", "12"}};  // a sweep key named as a serve column
  const std::vector<std::string> lines = csv_lines(format_csv({r}));
  std::string header = "sweep_requests";
  for (const std::string& c : serve_csv_columns()) header += "," + c;
  REQUIRE(!lines.empty());
  CHECK(lines[0] == header);
  CHECK(lines[0] ==
        "sweep_requests,step,hardware,scheduler,requests,completed,rejected,preemptions,duration_s,"
        "request_throughput,output_throughput,total_token_throughput,ttft_mean_s,ttft_median_s,ttft_p90_s,ttft_p99_s,"
        "tpot_mean_s,tpot_median_s,tpot_p90_s,tpot_p99_s,itl_mean_s,itl_median_s,itl_p90_s,itl_p99_s,e2e_mean_s,"
        "e2e_median_s,e2e_p90_s,e2e_p99_s,goodput,slo_attainment,mean_batch,kv_utilization_mean,prefix_hit_rate,"
        "source");
  REQUIRE(lines.size() == 1 + 2 * 3);  // each step, then its two what-if rows (nothing executed)
  for (std::size_t i = 1; i < lines.size(); ++i) CHECK(split_csv_line(lines[i])->back() == "predicted");

  const std::vector<std::string> row = *split_csv_line(lines[1]);
  REQUIRE(row.size() == serve_csv_columns().size() + 1);
  CHECK(row[0] == "12");
  CHECK(row[1] == "static");
  CHECK(row[2] == r.serve[0].hardware);
  CHECK(row[3] == r.serve[0].scheduler);
  CHECK(row[5] == std::to_string(served));
  CHECK(std::stod(row[12]) == approx(r.serve[0].predicted.metrics.ttft.mean));

  const std::vector<std::string> what_if = *split_csv_line(lines[2]);
  CHECK(what_if[2] == r.serve[0].what_if[0].hardware);
  CHECK(what_if[5] == std::to_string(served));
  const std::vector<std::string> failed = *split_csv_line(lines[3]);
  REQUIRE(failed.size() == row.size());
  CHECK(failed[2] == "test-no-memory");
  CHECK(failed[5].empty());
  CHECK(failed.back() == "predicted");
  CHECK(split_csv_line(lines[4])->at(1) == "+continuous");
}

TEST_CASE("serve report: CSV mixing serving and other runs keeps one header") {
  RunResult graph_run;
  graph_run.scenario = "decode";
  StepResult step;
  step.step = "bf16";
  step.predicted.hardware = "test-h100";
  step.predicted.step_time = 0.01;
  graph_run.steps.push_back(step);
  const RunResult& serve_run = cached_result();

  const std::vector<std::string> lines = csv_lines(format_csv({graph_run, serve_run}));
  REQUIRE(lines.size() == 1 + 1 + 2 * 3);
  const std::vector<std::string> header = *split_csv_line(lines[0]);
  auto column = [&header](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE_MESSAGE(it != header.end(), name);
    return static_cast<std::size_t>(it - header.begin());
  };
  CHECK(std::count(header.begin(), header.end(), "step") == 1);
  CHECK(std::count(header.begin(), header.end(), "hardware") == 1);
  for (const std::string& line : lines) CHECK(split_csv_line(line)->size() == header.size());

  const std::vector<std::string> graph_row = *split_csv_line(lines[1]);
  CHECK(graph_row[column("step")] == "bf16");
  CHECK(graph_row[column("predicted_step_s")] == "0.01");
  CHECK(graph_row[column("ttft_mean_s")].empty());

  const std::vector<std::string> serve_row = *split_csv_line(lines[2]);
  CHECK(serve_row[column("scenario")] == "serve_tiny");
  CHECK(serve_row[column("step")] == "static");
  CHECK(serve_row[column("hardware")] == serve_run.serve[0].hardware);
  CHECK(serve_row[column("completed")] == std::to_string(served));
  CHECK(serve_row[column("predicted_step_s")].empty());
}

TEST_CASE("serve report: vLLM benchmark JSON of a serve step") {
  const RunResult& r = cached_result();
  const ServeSpec spec = small_traffic();
  const ServeStepResult& s = r.serve[1];
  const ServeMetrics& m = s.predicted.metrics;
  const json j = json::parse(format_vllm_bench_json(r, 1, &spec));

  for (const char* key : {"date",
                          "backend",
                          "model_id",
                          "tokenizer_id",
                          "num_prompts",
                          "request_rate",
                          "burstiness",
                          "max_concurrency",
                          "duration",
                          "completed",
                          "total_input_tokens",
                          "total_output_tokens",
                          "request_throughput",
                          "request_goodput",
                          "output_throughput",
                          "total_token_throughput",
                          "input_lens",
                          "output_lens",
                          "ttfts",
                          "itls",
                          "generated_texts",
                          "errors"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(std::regex_match(j["date"].get<std::string>(), std::regex("[0-9]{8}-[0-9]{6}")));
  CHECK(j["backend"] == "perfsim-predicted");
  CHECK(j["model_id"] == r.model);
  CHECK(j["tokenizer_id"] == r.model);
  CHECK(j["num_prompts"] == served + 1);
  CHECK(j["request_rate"].get<double>() == 50.0);
  CHECK(j["burstiness"].get<double>() == 1.0);
  CHECK(j["max_concurrency"].is_null());
  CHECK(j["completed"] == m.completed);
  CHECK(j["total_input_tokens"] == m.input_tokens);
  CHECK(j["total_output_tokens"] == m.output_tokens);
  CHECK(j["request_goodput"].get<double>() == sig6_of(m.goodput));

  // Every request, a refused one included (its error the reason, no output).
  for (const char* key : {"input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"})
    CHECK_MESSAGE(j[key].size() == static_cast<std::size_t>(served + 1), key);
  CHECK(j["errors"][0] == "");
  CHECK(j["errors"][refused_id] == s.predicted.run.requests[refused_id].rejected);
  CHECK(j["errors"][refused_id] != "");
  CHECK(j["output_lens"][refused_id] == 0);
  CHECK(j["ttfts"][refused_id] == 0);
  CHECK(j["input_lens"][refused_id] == s.predicted.run.requests[refused_id].request.prompt);
  CHECK(j["itls"][0].empty());

  for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
    for (const char* stat : {"mean", "median", "std", "p99"})
      CHECK_MESSAGE(j.contains(std::string(stat) + "_" + metric + "_ms"), metric);
    const json& p = j[std::string("percentiles_") + metric + "_ms"];
    REQUIRE(p.size() == 3);
    CHECK(p[0][0] == 50);
    CHECK(p[1][0] == 90);
    CHECK(p[2][0] == 99);
    CHECK(p[2][1] == j[std::string("p99_") + metric + "_ms"]);
  }
  CHECK(j["mean_ttft_ms"].get<double>() == sig6_of(m.ttft.mean * 1000));
  CHECK(j["mean_ttft_ms"].get<double>() == approx(m.ttft.mean * 1000).epsilon(1e-6));
  CHECK(j["median_tpot_ms"].get<double>() == sig6_of(m.tpot.median * 1000));
  CHECK(j["p99_e2el_ms"].get<double>() == sig6_of(m.e2e.p99 * 1000));
  CHECK(j["mean_itl_ms"].get<double>() == sig6_of(m.itl.mean * 1000));
  // numpy's np.std (ddof 0) of the served requests' TTFTs, in ms.
  std::vector<double> ttfts;
  for (std::size_t i = 0; i < j["ttfts"].size(); ++i)
    if (j["errors"][i] == "") ttfts.push_back(j["ttfts"][i].get<double>() * 1000);
  double mean = 0, var = 0;
  for (double t : ttfts) mean += t / static_cast<double>(ttfts.size());
  for (double t : ttfts) var += (t - mean) * (t - mean) / static_cast<double>(ttfts.size());
  CHECK(j["std_ttft_ms"].get<double>() == approx(std::sqrt(var)).epsilon(1e-4).scale(1e-6));
}

TEST_CASE("serve report: vLLM benchmark JSON traffic fields") {
  RunResult r = cached_result();
  SUBCASE("no SLO: no goodput") {
    ServeSpec spec = small_traffic();
    spec.slo = {};
    CHECK(json::parse(format_vllm_bench_json(r, 0, &spec))["request_goodput"].is_null());
  }
  SUBCASE("closed loop: unpaced, at most one request per user") {
    ServeSpec spec = small_traffic();
    spec.arrivals.kind = ArrivalKind::closed;
    spec.arrivals.users = 4;
    const json j = json::parse(format_vllm_bench_json(r, 0, &spec));
    CHECK(j["request_rate"] == "inf");
    CHECK(j["max_concurrency"] == 4);
  }
  SUBCASE("without the spec: read from the traffic's description") {
    r.traffic = "serve 12 requests, gamma 2.50/s burstiness 0.50, prompt 32.0, output 8.00, seed 7";
    const json j = json::parse(format_vllm_bench_json(r, 0));
    CHECK(j["request_rate"].get<double>() == 2.5);
    CHECK(j["burstiness"].get<double>() == 0.5);
    CHECK(j["request_goodput"].is_number());
  }
  SUBCASE("a trace: unpaced") {
    r.traffic = "serve 12 requests, trace /data/arrivals.jsonl, seed 7";
    CHECK(json::parse(format_vllm_bench_json(r, 0))["request_rate"] == "inf");
  }
  SUBCASE("no such step") { CHECK_THROWS_AS((void)format_vllm_bench_json(r, 2), std::out_of_range); }
}

TEST_CASE("serve report: vLLM benchmark JSON of services of several engines") {
  const ModelConfig m = test_models::tiny_llama();
  const Hardware hw = test_models::h100_node();
  const ServeSpec spec = small_traffic();
  const std::vector<Request> requests = small_requests(m, spec);
  const std::vector<PassSpec> base{PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"paged_kv"}};
  RunResult r;
  r.scenario = "services";
  r.model = m.name;
  r.backend = "none";
  r.traffic = describe(spec);

  // Two replicas behind round robin: the service's figures, every request of both replicas.
  ParallelSpec two;
  two.dp = 2;
  ServeStepResult replicas;
  replicas.step = "2 replicas";
  replicas.predicted = predict_serving(m, hw, spec, requests, {StackStep{"2 replicas", base, ""}}, 0, two);
  REQUIRE(replicas.predicted.replicas.size() == 2);
  r.serve.push_back(replicas);
  // 1P1D: each request's TTFT holds its KV transfer.
  std::vector<PassSpec> pd = base;
  pd.push_back(PassSpec{"prefill_engines", 1.0});
  pd.push_back(PassSpec{"decode_engines", 1.0});
  ServeStepResult split;
  split.step = "1P1D";
  split.predicted = predict_serving(m, hw, spec, requests, {StackStep{"1P1D", pd, ""}}, 0);
  REQUIRE(split.predicted.transfers);
  r.serve.push_back(split);

  const json a = json::parse(format_vllm_bench_json(r, 0, &spec));
  CHECK(a["perfsim_service"] == "2 replicas (2 GPUs)");
  CHECK(a["perfsim_gpus"] == 2);
  int64_t per_replica = 0;
  for (const auto& rep : replicas.predicted.replicas) per_replica += rep.metrics.completed;
  CHECK(a["completed"] == per_replica);
  CHECK(a["ttfts"].size() == requests.size());

  const json b = json::parse(format_vllm_bench_json(r, 1, &spec));
  CHECK(b["perfsim_service"] == "1P1D, 1-GPU engines");
  CHECK(b["perfsim_gpus"] == 2);
  const KvTransfers& t = *split.predicted.transfers;
  int checked = 0;
  for (const RequestRecord& q : split.predicted.run.requests) {
    if (!q.rejected.empty()) continue;
    const auto id = static_cast<std::size_t>(q.request.id);
    // vLLM's TTFT: arrival to first token, the prefill and the exposed transfer inside it.
    CHECK(b["ttfts"][id].get<double>() == approx(q.first_token - q.request.arrival).epsilon(1e-5));
    CHECK(q.first_token - q.request.arrival >= t.exposed[id] + (t.prefilled[id] - q.request.arrival) - 1e-9);
    ++checked;
  }
  CHECK(checked > 0);
}
