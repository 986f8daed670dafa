// One serving step as `vllm bench serve --save-result --save-detailed` writes its result (vLLM's
// benchmarks/serve.py: the same keys, milliseconds for the latency statistics, seconds for the
// per-request lists), so the tools that read vLLM's results read perfsim's predictions and its
// executed runs.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "core/report/report.hpp"
#include "core/report/serve_json.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

constexpr double inf = std::numeric_limits<double>::infinity();

// What vLLM's command line says about the traffic.
struct Traffic {
  double rate = inf;                    // --request-rate ("inf": all at once, or paced otherwise)
  double burstiness = 1;                // --burstiness
  int64_t max_concurrency = 0;          // --max-concurrency (0: none)
  bool ramp = false;                    // --ramp-up-strategy linear
  double ramp_start = 0, ramp_end = 0;  // --ramp-up-start-rps, --ramp-up-end-rps
  bool slo = true;                      // --goodput given
};

// The number at the start of `text` (after `key`, when given and found); NaN when none.
double number_after(std::string_view text, std::string_view key) {
  if (!key.empty()) {
    const auto at = text.find(key);
    if (at == std::string_view::npos) return std::nan("");
    text.remove_prefix(at + key.size());
  }
  double v = std::nan("");
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

Traffic traffic_of(const RunResult& r, const EngineRun& run, const ServeSpec* spec) {
  Traffic t;
  // Closed loop: as many requests in flight as clients, each sent when its client is ready,
  // which vLLM runs as --request-rate inf --max-concurrency USERS.
  for (const RequestRecord& q : run.requests)
    t.max_concurrency = std::max<int64_t>(t.max_concurrency, q.request.user + 1);
  if (spec != nullptr) {
    const Arrivals& a = spec->arrivals;
    if (a.kind == ArrivalKind::poisson || a.kind == ArrivalKind::gamma) t.rate = a.rate;
    if (a.kind == ArrivalKind::gamma) t.burstiness = a.burstiness;
    if (a.kind == ArrivalKind::closed) t.max_concurrency = a.users;
    if (a.kind == ArrivalKind::ramp) t.ramp = true, t.ramp_start = a.start_rate, t.ramp_end = a.rate;
    t.slo = spec->slo.ttft > 0 || spec->slo.tpot > 0 || spec->slo.e2e > 0;
    return t;
  }
  // Without the spec, from describe(ServeSpec) ("serve 2000 requests, poisson 20.0/s, ..."):
  // its rates carry three significant digits. Whether an SLO was set is unknown, so goodput is
  // written (it equals the request throughput without one).
  const std::string_view text = r.traffic;
  const auto after = text.find("requests, ");
  const std::string_view arrivals = after == std::string_view::npos ? text : text.substr(after + 10);
  if (arrivals.rfind("poisson ", 0) == 0) {
    t.rate = number_after(arrivals, "poisson ");
  } else if (arrivals.rfind("gamma ", 0) == 0) {
    t.rate = number_after(arrivals, "gamma ");
    t.burstiness = number_after(arrivals, "burstiness ");
  } else if (arrivals.rfind("ramp ", 0) == 0) {
    t.ramp = true;
    t.ramp_start = number_after(arrivals, "ramp ");
    t.ramp_end = number_after(arrivals, " to ");
  }
  if (std::isnan(t.rate)) t.rate = inf;
  if (std::isnan(t.burstiness)) t.burstiness = 1;
  return t;
}

double std_dev(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double sum = 0;
  for (double x : v) sum += (x - mean) * (x - mean);
  return std::sqrt(sum / static_cast<double>(v.size()));  // numpy's np.std (ddof 0)
}

// mean_X_ms, median_X_ms, std_X_ms, pP_X_ms and percentiles_X_ms, as vLLM writes them with
// --metric-percentiles 50,90,99 (0 when there are no values, as np.mean(x or 0) gives).
void add_metric(json& j, const char* name, const LatencyStats& s, const std::vector<double>& values) {
  auto ms = [](double seconds) { return sig6(std::isfinite(seconds) ? seconds * 1e3 : 0); };
  j[fmt::format("mean_{}_ms", name)] = ms(s.mean);
  j[fmt::format("median_{}_ms", name)] = ms(s.median);
  j[fmt::format("std_{}_ms", name)] = ms(std_dev(values));
  j[fmt::format("p50_{}_ms", name)] = ms(s.median);
  j[fmt::format("p90_{}_ms", name)] = ms(s.p90);
  j[fmt::format("p99_{}_ms", name)] = ms(s.p99);
  j[fmt::format("percentiles_{}_ms", name)] = {{50, ms(s.median)}, {90, ms(s.p90)}, {99, ms(s.p99)}};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  return std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &tm) > 0 ? text : "";
}

}  // namespace

std::string format_vllm_bench_json(const RunResult& r, std::size_t step, const ServeSpec* spec, ServeRun which) {
  if (step >= r.serve.size())
    throw std::out_of_range(fmt::format("{} has no serve step {} (it has {})", r.scenario, step, r.serve.size()));
  const ServeStepResult& s = r.serve[step];
  if (!s.does_not_fit.empty())
    throw std::out_of_range(fmt::format("{} step '{}' does not fit: {}", r.scenario, s.step, s.does_not_fit));
  const bool measured = which == ServeRun::measured;
  if (measured && !s.executed)
    throw std::invalid_argument(fmt::format("{} / {} has no executed run", r.scenario, s.step));
  const EngineRun& run = measured ? s.executed->run : s.predicted.run;
  const ServeMetrics& m = measured ? s.executed->metrics : s.predicted.metrics;
  const Traffic t = traffic_of(r, run, spec);

  json j;
  j["date"] = utc_now();
  j["backend"] = measured ? "perfsim-measured" : "perfsim-predicted";
  // Extra keys, as vLLM's --metadata adds them: which run this is, and where it was executed.
  j["perfsim_run"] = measured ? "measured" : "predicted";
  if (measured) j["perfsim_backend"] = r.backend;
  // The service behind the figures: its engines and GPUs (vLLM's benchmark sees one endpoint).
  const ServiceWords service = describe_service(s.predicted);
  j["perfsim_service"] = service.layout;
  j["perfsim_gpus"] = service.gpus;
  j["model_id"] = r.model;
  j["tokenizer_id"] = r.model;
  j["num_prompts"] = m.requests;
  j["request_rate"] = std::isfinite(t.rate) ? json(t.rate) : json("inf");
  j["burstiness"] = t.burstiness;
  j["max_concurrency"] = t.max_concurrency > 0 ? json(t.max_concurrency) : json(nullptr);
  if (t.ramp) {
    j["ramp_up_strategy"] = "linear";
    j["ramp_up_start_rps"] = sig6(t.ramp_start);
    j["ramp_up_end_rps"] = sig6(t.ramp_end);
  }
  j["duration"] = sig6(m.duration);
  j["completed"] = m.completed;
  j["failed"] = m.rejected;
  j["total_input_tokens"] = m.input_tokens;
  j["total_output_tokens"] = m.output_tokens;
  j["request_throughput"] = sig6(m.request_throughput);
  j["request_goodput"] = t.slo ? sig6(m.goodput) : json(nullptr);
  j["output_throughput"] = sig6(m.output_throughput);
  j["total_token_throughput"] = sig6(m.total_token_throughput);

  // Every request, as vLLM lists its outputs: a refused one with its prompt, no output, TTFT 0
  // and the reason as its error. The engine keeps the gaps between tokens pooled, not per
  // request, so each request's list of ITLs is empty; the ITL statistics below are the pooled
  // gaps', as vLLM computes them from its per-request lists.
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(), itls = json::array(),
       texts = json::array(), errors = json::array();
  std::vector<double> ttft, tpot, e2el;
  for (const RequestRecord& q : run.requests) {
    const bool served = q.rejected.empty();
    const double first = served ? q.first_token - q.request.arrival : 0;
    const double total = served ? q.finished - q.request.arrival : 0;
    input_lens.push_back(q.request.prompt);
    output_lens.push_back(served ? q.generated : 0);
    ttfts.push_back(sig6(first));
    itls.push_back(json::array());
    texts.push_back("");
    errors.push_back(q.rejected);
    if (!served) continue;
    ttft.push_back(first);
    e2el.push_back(total);
    if (q.generated > 1) tpot.push_back((total - first) / static_cast<double>(q.generated - 1));
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["generated_texts"] = std::move(texts);
  j["errors"] = std::move(errors);
  add_metric(j, "ttft", m.ttft, ttft);
  add_metric(j, "tpot", m.tpot, tpot);
  add_metric(j, "itl", m.itl, run.itl);
  add_metric(j, "e2el", m.e2e, e2el);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace perfsim
