// An executed serving run in every output beside the prediction: the report's latency rows and
// its engine-steps section, the JSON report's "executed" object, the CSV's measured rows, the
// vLLM benchmark JSON of the measured run and its own trace process; on a run built by hand,
// and once through `perfsim run` on the CPU backend.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "approx.hpp"
#include "cli/subcommands.hpp"
#include "core/report/report.hpp"
#include "core/report/sections.hpp"
#include "core/report/serve_csv.hpp"
#include "core/report/serve_json.hpp"
#include "core/report/trace.hpp"
#include "core/serve/metrics.hpp"
#include "core/text.hpp"

using namespace perfsim;
using perfsim::test::approx;
using json = nlohmann::json;

namespace {

// Two requests served in four engine steps (two with prompts, two decodes only) and one
// refused, all arriving at 0; every time of the run multiplied by `k`.
EngineRun small_run(double k) {
  EngineRun run;
  run.pool = {8, 16, 4096};
  auto request = [](int64_t id, int64_t prompt, int64_t output) {
    RequestRecord q;
    q.request.id = id;
    q.request.prompt = prompt;
    q.request.output = output;
    return q;
  };
  RequestRecord first = request(0, 10, 4), second = request(1, 20, 2), refused = request(2, 5000, 8);
  first.admitted = 0, first.first_token = 0.010 * k, first.finished = 0.031 * k, first.generated = 4;
  second.admitted = 0.010 * k, second.first_token = 0.022 * k, second.finished = 0.026 * k, second.generated = 2;
  refused.rejected = "longer than max_seq";
  run.requests = {first, second, refused};
  auto step = [k](double start, double duration, int32_t seqs, int32_t tokens, int32_t prefill, int32_t decodes) {
    StepRecord s;
    s.start = start * k, s.duration = duration * k;
    s.seqs = seqs, s.tokens = tokens, s.prefill_tokens = prefill, s.decodes = decodes;
    s.kv_used_blocks = 2;
    return s;
  };
  run.steps = {step(0, 0.010, 1, 10, 10, 0), step(0.010, 0.012, 2, 21, 20, 1), step(0.022, 0.004, 2, 2, 0, 2),
               step(0.026, 0.005, 1, 1, 0, 1)};
  run.itl = {0.012 * k, 0.004 * k, 0.005 * k, 0.004 * k};
  run.end = 0.031 * k;
  return run;
}

// The executed steps of small_run(k): host 20% and device 60% of each wall time; the cost
// model's prices −20%, +25%, −25% and −20% off the walls, times `price`.
std::vector<ExecutedStep> small_steps(double k, double price) {
  std::vector<ExecutedStep> out;
  const double walls[] = {0.010, 0.012, 0.004, 0.005};
  const double prices[] = {0.008, 0.015, 0.003, 0.004};
  for (int i = 0; i < 4; ++i) {
    const double wall = walls[i] * k;
    out.push_back({wall, 0.6 * wall, 0.2 * wall, prices[i] * k * price});
  }
  return out;
}

ServeStepResult step_result(const std::string& name, double measured_k, double predicted_k, double price) {
  ServeStepResult s;
  s.step = name;
  s.hardware = "test-gpu";
  s.scheduler = "continuous";
  s.predicted.run = small_run(predicted_k);
  s.predicted.pool = s.predicted.run.pool;
  s.predicted.metrics = serve_metrics(s.predicted.run, Slo{});
  ServeStepResult::Executed e;
  e.run = small_run(measured_k);
  e.metrics = serve_metrics(e.run, Slo{});
  e.steps = small_steps(measured_k, price);
  e.held_bytes = 3 * 1024 * 1024;
  e.seconds = 1.5;
  s.executed = std::move(e);
  return s;
}

// "static" executed and predicted 20% faster; "+continuous" executed twice as fast as static
// and predicted twice as fast again; "+prefix" not executed.
RunResult executed_result() {
  RunResult r;
  r.scenario = "serve_hand";
  r.model = "tiny-llama";
  r.backend = "cuda";
  r.device = "test-gpu";
  r.traffic = "serve 3 requests, poisson 100/s, prompt 10.0, output 4.00, seed 1";
  r.workload = r.traffic;
  r.serve.push_back(step_result("static", 1, 0.8, 1));
  r.serve.push_back(step_result("+continuous", 0.5, 0.25, 0.5));
  ServeStepResult skipped = step_result("+prefix", 1, 0.4, 1);
  skipped.executed.reset();
  skipped.not_executed = "predicted to last 2.00 h on test-gpu, beyond execute.serve_seconds = 600";
  r.serve.push_back(std::move(skipped));
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  const std::vector<std::string> lines = lines_of(text);
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

const ReportSection* section_titled(const std::vector<ReportSection>& sections, const std::string& start) {
  for (const ReportSection& s : sections)
    if (s.title.rfind(start, 0) == 0) return &s;
  return nullptr;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("serve executed report: measured and error rows beside the predicted ones") {
  const RunResult r = executed_result();
  const std::vector<ReportSection> sections = serve_sections(r);
  const ReportSection* latency = section_titled(sections, "Serving latency and throughput");
  REQUIRE(latency != nullptr);
  CHECK(latency->title == "Serving latency and throughput (predicted on test-gpu, measured on cuda; ms)");
  const std::string table = latency->table.to_markdown();
  CHECK(has_line(table,
                 "| step | run | req/s | out tok/s | vs first | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | "
                 "ITL p50 | E2E p50 | E2E p99 | goodput | SLO met | preempt | rejected |"));
  // Static measured: TTFT p50 of 10 and 22 ms is 16 ms, TPOT of 7 and 4 ms 5.5 ms, E2E of 31 and
  // 26 ms 28.5 ms.
  CHECK(has_line(table,
                 "| static | measured | 64.5 | 194 | 1.00× | 16.0 | 21.9 | 5.50 | 6.97 | 4.50 | 28.5 | 30.9 | "
                 "64.5 | 100.0% | 0 | 1 |"));
  // Every time 20% shorter: latencies −20%, throughputs +25%; the base step's "vs first" has none.
  CHECK(has_line(table,
                 "| static | error | +25.0% | +25.0% |  | -20.0% | -20.0% | -20.0% | -20.0% | -20.0% | "
                 "-20.0% | -20.0% | +25.0% |  |  |  |"));
  // Predicted 3.20× the static step's output throughput, measured 2.00×.
  CHECK(table.find("| +continuous | predicted | 258 | 774 | 3.20× |") != std::string::npos);
  CHECK(table.find("| +continuous | measured | 129 | 387 | 2.00× |") != std::string::npos);
  CHECK(table.find("| +continuous | error | +100.0% | +100.0% | +60.0% | -50.0% |") != std::string::npos);
  // A step that did not execute: its predicted row alone, and the reason in the notes.
  CHECK(table.find("| +prefix | predicted |") != std::string::npos);
  CHECK(table.find("| +prefix | measured |") == std::string::npos);
  CHECK(std::count(latency->notes.begin(), latency->notes.end(), "not executed: " + r.serve[2].not_executed) == 1);
  CHECK(std::any_of(latency->notes.begin(), latency->notes.end(),
                    [](const std::string& n) { return n.rfind("measured: the same requests", 0) == 0; }));
}

TEST_CASE("serve executed report: engine steps, predicted vs measured, by kind") {
  const RunResult r = executed_result();
  const std::vector<ReportSection> sections = serve_sections(r);
  const ReportSection* steps = section_titled(sections, "Engine steps, predicted vs measured");
  REQUIRE(steps != nullptr);
  CHECK(steps->title == "Engine steps, predicted vs measured (on cuda; wall time, ms)");
  const std::string table = steps->table.to_markdown();
  CHECK(has_line(table,
                 "| step | kind | steps | wall p50 | wall p90 | pred p50 | err p50 | \\|err\\| p50 | dev err p50 | "
                 "host | host p50 | device | pred speedup | meas speedup |"));
  // Walls 4, 5, 10, 12 ms: median 7.5, p90 11.4; prices 3, 4, 8, 15 ms: median 6; errors −25%,
  // −20%, −20%, +25%: median −20%, of their sizes 22.5%.
  CHECK(has_line(table, "| static | all | 4 | 7.50 | 11.4 | 6.00 | -20.0% | 22.5% | +33.3% | 20.0% | 1.50 | 60.0% | 1.00× | 1.00× |"));
  CHECK(has_line(table, "| static | decode only | 2 | 4.50 | 4.90 | 3.50 | -22.5% | 22.5% | +29.2% | 20.0% | 0.90 | 60.0% |  |  |"));
  CHECK(has_line(table, "| static | with prefill | 2 | 11.0 | 11.8 | 11.5 | +2.5% | 22.5% | +70.8% | 20.0% | 2.20 | 60.0% |  |  |"));
  // Prices a quarter of the static step's for walls half of them: −60%, −37.5%, −62.5%, −60%.
  CHECK(has_line(table,
                 "| +continuous | all | 4 | 3.75 | 5.70 | 1.50 | -60.0% | 60.0% | -33.3% | 20.0% | 0.75 | 60.0% | 3.20× | "
                 "2.00× |"));
  CHECK(table.find("| +prefix |") == std::string::npos);
  const std::vector<std::string> expected_notes = {
      "speedup: output tokens/s against static, the first executed step",
      "static: 4 engine steps in 1.50 s (setup included), 3.00 MiB of weights and KV pages held"};
  for (const std::string& note : expected_notes)
    CHECK_MESSAGE(std::count(steps->notes.begin(), steps->notes.end(), note) == 1, note);
}

TEST_CASE("serve executed report: the text report carries both, a predicted-only run neither") {
  const RunResult r = executed_result();
  const std::string text = format_table({r});
  CHECK(text.find("Engine steps, predicted vs measured") != std::string::npos);
  CHECK(text.find("static       error") != std::string::npos);
  CHECK(format_markdown({r}).find("### Engine steps, predicted vs measured") != std::string::npos);

  RunResult predicted_only = r;
  for (ServeStepResult& s : predicted_only.serve) s.executed.reset();
  const std::vector<ReportSection> sections = serve_sections(predicted_only);
  CHECK(section_titled(sections, "Engine steps") == nullptr);
  const ReportSection* latency = section_titled(sections, "Serving latency and throughput");
  REQUIRE(latency != nullptr);
  CHECK(latency->title == "Serving latency and throughput (predicted on test-gpu; ms)");
  CHECK(latency->table.to_markdown().find("| run |") == std::string::npos);
}

TEST_CASE("serve executed report: the sweep summary adds the measured headline figures") {
  RunResult a = executed_result(), b = executed_result();
  a.sweep_point = {{"rate", "1"}};
  b.sweep_point = {{"rate", "2"}};
  const std::optional<ReportSection> summary = serve_sweep_summary({a, b});
  REQUIRE(summary.has_value());
  CHECK(summary->title == "Sweep summary (serving, predicted and measured; ms)");
  const std::string table = summary->table.to_markdown();
  CHECK(table.find("| meas out tok/s | meas TTFT p50 | meas TPOT p50 | meas E2E p99 |") != std::string::npos);
  CHECK(table.find("| 194 | 16.0 | 5.50 | 30.9 |") != std::string::npos);
  CHECK(table.find("| — | — | — | — |") != std::string::npos);  // +prefix did not execute
}

TEST_CASE("serve executed report: JSON has an executed object beside the predicted one") {
  const RunResult r = executed_result();
  const json serve = json::parse(format_json({r}))["results"][0]["serve"];
  REQUIRE(serve["steps"].size() == 3);
  const json& step = serve["steps"][0];
  REQUIRE(step.contains("executed"));
  CHECK_FALSE(serve["steps"][2].contains("executed"));
  CHECK(serve["steps"][2]["not_executed"] == r.serve[2].not_executed);

  const ServeStepResult::Executed& e = *r.serve[0].executed;
  const json& x = step["executed"];
  CHECK(x["metrics"] == json::parse(serve_metrics_json(e.metrics).dump()));
  CHECK(x["metrics"]["completed"] == 2);
  CHECK(x["metrics"]["ttft"]["median"].get<double>() == approx(0.016));
  CHECK(x["pool"]["blocks"] == 8);
  CHECK(x["held_bytes"].get<double>() == 3 * 1024 * 1024);
  CHECK(x["seconds"].get<double>() == 1.5);

  const json& requests = x["requests"];
  CHECK(requests["ttft"] == json::array({0.01, 0.022}));
  CHECK(requests["e2e"] == json::array({0.031, 0.026}));
  CHECK(requests["rejected"] == json::array({2}));

  const json& timeline = x["timeline"];
  for (const char* key :
       {"t", "duration", "batch", "tokens", "prefill_tokens", "kv_used", "waiting", "device", "host", "predicted"}) {
    REQUIRE_MESSAGE(timeline.contains(key), key);
    CHECK_MESSAGE(timeline[key].size() == 4, key);
  }
  CHECK(timeline["duration"][1].get<double>() == approx(0.012));
  CHECK(timeline["device"][1].get<double>() == approx(0.0072));
  CHECK(timeline["host"][1].get<double>() == approx(0.0024));
  CHECK(timeline["predicted"][1].get<double>() == approx(0.015));
  // The predicted run's timeline keeps its keys only.
  CHECK_FALSE(step["predicted"]["timeline"].contains("device"));

  const json& figures = x["engine_steps"];
  CHECK(figures["all"]["count"] == 4);
  CHECK(figures["all"]["wall_median"].get<double>() == approx(0.0075));
  CHECK(figures["all"]["error_median"].get<double>() == approx(-0.2));
  CHECK(figures["all"]["abs_error_median"].get<double>() == approx(0.225));
  CHECK(figures["all"]["host_share"].get<double>() == approx(0.2));
  CHECK(figures["all"]["device_share"].get<double>() == approx(0.6));
  CHECK(figures["decode"]["count"] == 2);
  CHECK(figures["decode"]["error_median"].get<double>() == approx(-0.225));
  CHECK(figures["prefill"]["count"] == 2);
  CHECK(figures["prefill"]["error_median"].get<double>() == approx(0.025));
}

TEST_CASE("serve executed report: summarize_executed_steps without steps of a kind") {
  ServeStepResult::Executed e;
  e.run = small_run(1);
  e.steps = small_steps(1, 1);
  for (StepRecord& s : e.run.steps) s.prefill_tokens = 0;
  const ExecutedStepSummary summary = summarize_executed_steps(e);
  CHECK(summary.all.steps == 4);
  CHECK(summary.decode.steps == 4);
  CHECK(summary.prefill.steps == 0);
  CHECK(std::isnan(summary.prefill.wall_median));
  CHECK(std::isnan(summary.prefill.error_median));
  CHECK(std::isnan(summary.prefill.host_share));
  // A step the clock saw take no time counts, but has no error.
  e.steps[0].wall = 0;
  CHECK(summarize_executed_steps(e).all.steps == 4);
  CHECK(summarize_executed_steps(e).all.error_median == approx(-0.2));
}

TEST_CASE("serve executed report: CSV has a measured row after each executed step's predicted one") {
  const RunResult r = executed_result();
  const std::vector<std::vector<std::string>> rows = serve_csv_rows(r);
  const std::vector<std::string>& columns = serve_csv_columns();
  REQUIRE(columns.back() == "source");
  auto column = [&columns](const std::string& name) {
    return static_cast<std::size_t>(std::find(columns.begin(), columns.end(), name) - columns.begin());
  };
  REQUIRE(rows.size() == 5);
  const std::vector<std::string> steps = {"static", "static", "+continuous", "+continuous", "+prefix"};
  const std::vector<std::string> sources = {"predicted", "measured", "predicted", "measured", "predicted"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    REQUIRE(rows[i].size() == columns.size());
    CHECK(rows[i][column("step")] == steps[i]);
    CHECK(rows[i][column("hardware")] == "test-gpu");
    CHECK(rows[i][column("source")] == sources[i]);
  }
  CHECK(std::stod(rows[1][column("ttft_median_s")]) == approx(0.016));
  CHECK(std::stod(rows[0][column("ttft_median_s")]) == approx(0.0128));
  CHECK(std::stod(rows[1][column("output_throughput")]) == approx(6 / 0.031));

  // Through format_csv: one header, the rows in the same order.
  const std::vector<std::string> lines = lines_of(format_csv({r}));
  REQUIRE(lines.size() == 1 + rows.size());
  CHECK(split_csv_line(lines[2])->back() == "measured");
}

TEST_CASE("serve executed report: vLLM benchmark JSON of the measured run") {
  const RunResult r = executed_result();
  const json predicted = json::parse(format_vllm_bench_json(r, 0));
  const json measured = json::parse(format_vllm_bench_json(r, 0, nullptr, ServeRun::measured));
  CHECK(predicted["backend"] == "perfsim-predicted");
  CHECK(predicted["perfsim_run"] == "predicted");
  CHECK_FALSE(predicted.contains("perfsim_backend"));
  CHECK(measured["backend"] == "perfsim-measured");
  CHECK(measured["perfsim_run"] == "measured");
  CHECK(measured["perfsim_backend"] == "cuda");

  const ServeMetrics& m = r.serve[0].executed->metrics;
  CHECK(measured["completed"] == m.completed);
  CHECK(measured["failed"] == 1);
  CHECK(measured["duration"].get<double>() == approx(0.031));
  CHECK(measured["median_ttft_ms"].get<double>() == approx(16.0));
  CHECK(predicted["median_ttft_ms"].get<double>() == approx(12.8));
  CHECK(measured["p99_e2el_ms"].get<double>() == approx(m.e2e.p99 * 1e3));
  CHECK(measured["ttfts"] == json::array({0.01, 0.022, 0}));
  CHECK(measured["errors"][2] == "longer than max_seq");

  CHECK_THROWS_AS((void)format_vllm_bench_json(r, 2, nullptr, ServeRun::measured), std::invalid_argument);
  CHECK_NOTHROW((void)format_vllm_bench_json(r, 2));
}

TEST_CASE("serve executed report: the trace has a measured process after each executed step's predicted one") {
  const RunResult r = executed_result();
  const json events = json::parse(format_trace({r}))["traceEvents"];
  std::map<int, std::string> names;
  for (const json& e : events)
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
  const std::map<int, std::string> expected = {{1, "serve · serve_hand / static (predicted, test-gpu)"},
                                               {2, "serve · serve_hand / static (measured, cuda)"},
                                               {3, "serve · serve_hand / +continuous (predicted, test-gpu)"},
                                               {4, "serve · serve_hand / +continuous (measured, cuda)"},
                                               {5, "serve · serve_hand / +prefix (predicted, test-gpu)"}};
  CHECK(names == expected);

  std::vector<json> spans;
  int request_slices = 0;
  for (const json& e : events) {
    if (e["pid"] != 2) continue;
    if (e["ph"] == "X") spans.push_back(e);
    if (e["ph"] == "b") ++request_slices;
  }
  REQUIRE(spans.size() == 4);
  CHECK(request_slices == 2 * 4);  // two served requests, each whole and queued, prefill, decode
  const json& second = spans[1];
  CHECK(second["ts"].get<double>() == approx(10000));
  CHECK(second["dur"].get<double>() == approx(12000));
  CHECK(second["args"]["prefill_tokens"] == 20);
  CHECK(second["args"]["device_us"].get<double>() == approx(7200));
  CHECK(second["args"]["host_us"].get<double>() == approx(2400));
  CHECK(second["args"]["predicted_us"].get<double>() == approx(15000));
  CHECK(second["args"]["error"].get<double>() == approx(0.25));
  // The predicted process's steps carry no measured seconds.
  for (const json& e : events)
    if (e["pid"] == 1 && e["ph"] == "X") CHECK_FALSE(e["args"].contains("device_us"));
}

TEST_CASE("serve executed report: perfsim run on the CPU backend writes the measured run everywhere") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("perfsim_serve_executed_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path scenario = dir / "serve_small.lua";
  std::ofstream(scenario) << R"(return scenario {
  name = "serve_small",
  model = model "tiny-llama",
  hardware = "H100-SXM",
  workload = serve {
    requests = 6, seed = 3,
    arrivals = poisson { rate = 1000 },
    prompt = lengths { dist = "uniform", min = 8, max = 24 },
    output = lengths { dist = "uniform", min = 2, max = 4 },
  },
  stacks = {
    step("static", "bf16", "flash_attention", {scheduler = "static", max_batch = 2}),
    step("+continuous", {scheduler = "continuous"}, "paged_kv"),
  },
}
)";
  RunArgs a;
  a.scenario = scenario.string();
  a.backend = "cpu";
  a.quiet = true;
  a.format = "csv";
  a.output = (dir / "report.csv").string();
  a.trace = (dir / "trace.json").string();
  a.vllm_json = (dir / "vllm").string();
  REQUIRE(cmd_run(a) == 0);

  std::vector<std::string> files;
  for (const fs::directory_entry& f : fs::directory_iterator(dir / "vllm"))
    files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"serve-small-1-static-measured.json", "serve-small-1-static.json",
                                          "serve-small-2-continuous-measured.json", "serve-small-2-continuous.json"});
  const json measured = json::parse(read_file(dir / "vllm" / "serve-small-2-continuous-measured.json"));
  CHECK(measured["perfsim_run"] == "measured");
  CHECK(measured["completed"] == 6);

  const std::vector<std::string> csv = lines_of(read_file(dir / "report.csv"));
  // Each step predicted, measured, then predicted on the scenario's H100 (a what-if on the CPU).
  REQUIRE(csv.size() == 1 + 2 * 3);
  CHECK(split_csv_line(csv[2])->back() == "measured");
  CHECK(split_csv_line(csv[5])->back() == "measured");
  CHECK(split_csv_line(csv[6])->back() == "predicted");

  int measured_processes = 0;
  const json trace = json::parse(read_file(dir / "trace.json"));
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name" &&
        e["args"]["name"].get<std::string>().find("(measured, cpu)") != std::string::npos)
      ++measured_processes;
  CHECK(measured_processes == 2);
  fs::remove_all(dir);
}
