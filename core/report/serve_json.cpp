// The "serve" object of the JSON report: per stack step the engine's pool, its metrics, every
// served request and the engine's steps over time (what the serving charts draw), the same for
// the executed run beside the cost model's price of each executed step, and the metrics on the
// other hardware. Seconds; times of a request relative to its arrival.
#include "core/report/serve_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "core/serve/metrics.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

// The timeline keeps at most this many engine steps (a run of thousands of requests has tens of
// thousands): enough for a chart, small enough for a report.
constexpr std::size_t timeline_points = 2000;

json latency_json(const LatencyStats& s) {
  return {{"count", s.count},   {"mean", sig6(s.mean)}, {"median", sig6(s.median)},
          {"p90", sig6(s.p90)}, {"p99", sig6(s.p99)},   {"max", sig6(s.max)}};
}

json requests_json(const EngineRun& run) {
  json arrival = json::array(), prompt = json::array(), output = json::array(), ttft = json::array(),
       e2e = json::array(), queue = json::array(), preemptions = json::array(), rejected = json::array();
  std::map<std::string, int64_t> reasons;
  for (const RequestRecord& r : run.requests) {
    if (!r.rejected.empty()) {
      rejected.push_back(r.request.id);
      ++reasons[r.rejected];
      continue;
    }
    const double at = r.request.arrival;
    arrival.push_back(sig6(at));
    prompt.push_back(r.request.prompt);
    output.push_back(r.generated);
    ttft.push_back(sig6(r.first_token - at));
    e2e.push_back(sig6(r.finished - at));
    queue.push_back(sig6(r.admitted - at));
    preemptions.push_back(r.preemptions);
  }
  json reason_counts = json::object();
  for (const auto& [why, n] : reasons) reason_counts[why] = n;
  return {{"arrival", std::move(arrival)},
          {"prompt", std::move(prompt)},
          {"output", std::move(output)},
          {"ttft", std::move(ttft)},
          {"e2e", std::move(e2e)},
          {"queue", std::move(queue)},
          {"preemptions", std::move(preemptions)},
          {"rejected", std::move(rejected)},
          {"reasons", std::move(reason_counts)}};
}

// `executed`: the executed run's step seconds, added as arrays beside the engine's figures.
json timeline_json(const EngineRun& run, const std::vector<ExecutedStep>* executed = nullptr) {
  json t = json::array(), duration = json::array(), batch = json::array(), tokens = json::array(),
       prefill = json::array(), kv = json::array(), waiting = json::array(), device = json::array(),
       host = json::array(), predicted = json::array();
  const std::size_t n = run.steps.size();
  // More steps than points: every k-th step, k = ceil(n / points), so at most `points` remain.
  const std::size_t k = n > timeline_points ? (n + timeline_points - 1) / timeline_points : 1;
  const double blocks = static_cast<double>(run.pool.blocks);
  for (std::size_t i = 0; i < n; i += k) {
    const StepRecord& s = run.steps[i];
    t.push_back(sig6(s.start));
    duration.push_back(sig6(s.duration));
    batch.push_back(s.seqs);
    tokens.push_back(s.tokens);
    prefill.push_back(s.prefill_tokens);
    kv.push_back(sig6(blocks > 0 ? static_cast<double>(s.kv_used_blocks) / blocks : 0));
    waiting.push_back(s.waiting);
    if (executed == nullptr) continue;
    const ExecutedStep e = i < executed->size() ? (*executed)[i] : ExecutedStep{};
    device.push_back(sig6(e.device));
    host.push_back(sig6(e.host));
    predicted.push_back(sig6(e.predicted));
  }
  json j = {{"t", std::move(t)},
            {"duration", std::move(duration)},
            {"batch", std::move(batch)},
            {"tokens", std::move(tokens)},
            {"prefill_tokens", std::move(prefill)},
            {"kv_used", std::move(kv)},
            {"waiting", std::move(waiting)}};
  if (executed != nullptr) {
    j["device"] = std::move(device);
    j["host"] = std::move(host);
    j["predicted"] = std::move(predicted);
  }
  return j;
}

json pool_json(const KvPool& p) {
  return {{"blocks", p.blocks}, {"block_tokens", p.block}, {"block_bytes", p.block_bytes}};
}

json step_figures_json(const ExecutedStepFigures& f) {
  return {{"count", f.steps},
          {"wall_median", sig6(f.wall_median)},
          {"wall_p90", sig6(f.wall_p90)},
          {"predicted_median", sig6(f.predicted_median)},
          {"error_median", sig6(f.error_median)},
          {"abs_error_median", sig6(f.abs_error_median)},
          {"host_share", sig6(f.host_share)},
          {"device_share", sig6(f.device_share)},
          {"device_error_median", sig6(f.device_error_median)},
          {"host_median", sig6(f.host_median)}};
}

json executed_json(const ServeStepResult::Executed& e) {
  const ExecutedStepSummary summary = summarize_executed_steps(e);
  json replicas = json::array();  // replicas executed on ranks: each one's measured metrics
  for (const ReplicaSummary& r : e.replicas) {
    json m = serve_metrics_json(r.metrics);
    if (!r.role.empty()) m["role"] = r.role;
    replicas.push_back(std::move(m));
  }
  return {{"pool", pool_json(e.run.pool)},
          {"replicas", std::move(replicas)},
          {"metrics", serve_metrics_json(e.metrics)},
          {"requests", requests_json(e.run)},
          {"timeline", timeline_json(e.run, &e.steps)},
          {"engine_steps",
           {{"all", step_figures_json(summary.all)},
            {"decode", step_figures_json(summary.decode)},
            {"prefill", step_figures_json(summary.prefill)}}},
          {"held_bytes", e.held_bytes},
          {"seconds", sig6(e.seconds)}};
}

json step_json(const ServeStepResult& s) {
  const ServePrediction& p = s.predicted;
  json j;
  j["step"] = s.step;
  j["hardware"] = s.hardware;
  j["scheduler"] = s.scheduler;
  j["not_executed"] = s.not_executed;
  if (!s.does_not_fit.empty()) {
    // Nothing was priced: the engine does not fit its GPU.
    j["does_not_fit"] = s.does_not_fit;
    return j;
  }
  j["pool"] = pool_json(p.pool);
  j["replicas"] = p.config.replicas;
  // Each replica's engine: tp GPUs a stage, pp stages; the service's GPUs.
  j["layout"] = {{"dp", p.layout.dp}, {"tp", p.layout.tp}, {"pp", p.layout.pp}, {"gpus", p.layout.dp * p.layout.tp * p.layout.pp}};
  j["router"] = name_of(p.config.router);
  // Speculative decoding as set: k drafts a step accepted at α each, and Leviathan et al.'s
  // expected tokens a verify pass (the runs' figures are in each run's metrics).
  if (p.config.speculative > 0)
    j["speculative"] = {{"drafts", p.config.speculative},
                        {"acceptance", sig6(p.config.acceptance)},
                        {"expected_tokens_per_verify",
                         sig6(speculative_tokens_per_step(p.config.acceptance, p.config.speculative))}};
  j["predicted"] = {{"metrics", serve_metrics_json(p.metrics)},
                    {"requests", requests_json(p.run)},
                    {"timeline", timeline_json(p.run)}};
  // Behind a router: each replica's figures over the requests it was sent.
  if (!p.replicas.empty()) {
    json replicas = json::array();
    for (const ReplicaSummary& r : p.replicas) {
      json m = serve_metrics_json(r.metrics);
      if (!r.role.empty()) m["role"] = r.role;
      replicas.push_back(std::move(m));
    }
    j["predicted"]["replicas"] = std::move(replicas);
    // Where each served request went, beside its figures in "requests".
    json replica = json::array();
    for (const RequestRecord& r : p.run.requests)
      if (r.rejected.empty()) replica.push_back(p.replica_of.at(static_cast<std::size_t>(r.request.id)));
    j["predicted"]["requests"]["replica"] = std::move(replica);
  }
  // Disaggregated: the transfer of each served request's KV, beside its figures in "requests".
  if (p.transfers) {
    const KvTransfers& k = *p.transfers;
    json sent = json::array(), waited = json::array(), prefill = json::array();
    for (const RequestRecord& r : p.run.requests) {
      if (!r.rejected.empty()) continue;
      const auto i = static_cast<std::size_t>(r.request.id);
      sent.push_back(sig6(k.seconds[i]));
      waited.push_back(sig6(k.exposed[i]));
      prefill.push_back(k.prefill_of[i]);
    }
    j["disaggregated"] = {{"prefill_engines", p.config.prefill_engines},
                          {"decode_engines", p.config.decode_engines},
                          {"kv_transfer", p.config.kv_layerwise ? "layerwise" : "after"},
                          {"link", k.link},
                          {"kv_bytes_per_token_per_gpu", k.bytes_per_token}};
    j["predicted"]["requests"]["kv_transfer_s"] = std::move(sent);
    j["predicted"]["requests"]["kv_waited_s"] = std::move(waited);
    j["predicted"]["requests"]["prefill_engine"] = std::move(prefill);
  }
  if (s.executed) {
    j["executed"] = executed_json(*s.executed);
    // Disaggregated on ranks: each served request's measured KV transfer, as in "requests".
    if (!s.executed->kv_transfers.empty()) {
      json sent = json::array();
      for (const RequestRecord& r : s.executed->run.requests)
        if (r.rejected.empty()) sent.push_back(sig6(s.executed->kv_transfers.at(static_cast<std::size_t>(r.request.id))));
      j["executed"]["requests"]["kv_transfer_s"] = std::move(sent);
    }
  }
  json what_if = json::array();
  for (const ServeStepResult::WhatIf& w : s.what_if)
    what_if.push_back({{"hardware", w.hardware}, {"metrics", serve_metrics_json(w.metrics)}, {"error", w.error}});
  j["what_if"] = std::move(what_if);
  return j;
}

}  // namespace

json sig6(double v) {
  if (!std::isfinite(v)) return nullptr;
  // Through the decimal text, so the value prints back as those six digits (no binary residue).
  const std::string text = fmt::format("{:.6g}", v);
  double rounded = v;
  std::from_chars(text.data(), text.data() + text.size(), rounded);
  return rounded;
}

namespace {

ExecutedStepFigures step_figures(const std::vector<const ExecutedStep*>& steps) {
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  ExecutedStepFigures f;
  f.steps = static_cast<int64_t>(steps.size());
  std::vector<double> wall, predicted, error, abs_error, device_error, host_seconds;
  double host = 0, device = 0;
  int64_t timed = 0;
  for (const ExecutedStep* s : steps) {
    wall.push_back(s->wall);
    predicted.push_back(s->predicted);
    if (s->wall <= 0) continue;  // a step the clock saw take no time has no error or shares
    ++timed;
    error.push_back(relative_error(s->predicted, s->wall));
    abs_error.push_back(std::fabs(error.back()));
    host += s->host / s->wall;
    device += s->device / s->wall;
    host_seconds.push_back(s->host);
    // The kernels alone: the price less its host part against the device's time.
    if (s->device > 0) device_error.push_back(relative_error(s->predicted - s->predicted_host, s->device));
  }
  for (std::vector<double>* v : {&wall, &predicted, &error, &abs_error, &device_error, &host_seconds})
    std::sort(v->begin(), v->end());
  f.wall_median = percentile_linear(wall, 50);
  f.wall_p90 = percentile_linear(wall, 90);
  f.predicted_median = percentile_linear(predicted, 50);
  f.error_median = percentile_linear(error, 50);
  f.abs_error_median = percentile_linear(abs_error, 50);
  f.host_share = timed > 0 ? host / static_cast<double>(timed) : none;
  f.device_share = timed > 0 ? device / static_cast<double>(timed) : none;
  f.device_error_median = device_error.empty() ? none : percentile_linear(device_error, 50);
  f.host_median = host_seconds.empty() ? none : percentile_linear(host_seconds, 50);
  return f;
}

}  // namespace

ExecutedStepSummary summarize_executed_steps(const ServeStepResult::Executed& e) {
  std::vector<const ExecutedStep*> all, decode, prefill;
  const std::size_t n = std::min(e.steps.size(), e.run.steps.size());
  for (std::size_t i = 0; i < n; ++i) {
    all.push_back(&e.steps[i]);
    (e.run.steps[i].prefill_tokens > 0 ? prefill : decode).push_back(&e.steps[i]);
  }
  return {step_figures(all), step_figures(decode), step_figures(prefill)};
}

json serve_metrics_json(const ServeMetrics& m) {
  json j;
  j["requests"] = m.requests;
  j["completed"] = m.completed;
  j["rejected"] = m.rejected;
  j["preemptions"] = m.preemptions;
  if (m.batches > 0) {  // static and dynamic batching
    j["batches"] = m.batches;
    j["kv_capped_batches"] = m.kv_capped_batches;
    j["kv_capped_smallest"] = m.kv_capped_smallest;
  }
  j["steps"] = m.steps;
  j["input_tokens"] = m.input_tokens;
  j["output_tokens"] = m.output_tokens;
  j["duration"] = sig6(m.duration);
  j["request_throughput"] = sig6(m.request_throughput);
  j["output_throughput"] = sig6(m.output_throughput);
  j["total_token_throughput"] = sig6(m.total_token_throughput);
  j["ttft"] = latency_json(m.ttft);
  j["tpot"] = latency_json(m.tpot);
  j["itl"] = latency_json(m.itl);
  j["e2e"] = latency_json(m.e2e);
  j["queue"] = latency_json(m.queue);
  j["goodput"] = sig6(m.goodput);
  j["slo_attainment"] = sig6(m.slo_attainment);
  j["mean_batch"] = sig6(m.mean_batch);
  j["mean_step_tokens"] = sig6(m.mean_step_tokens);
  j["mean_step_time"] = sig6(m.mean_step_time);
  j["kv_utilization_mean"] = sig6(m.kv_utilization_mean);
  j["kv_utilization_max"] = sig6(m.kv_utilization_max);
  j["prefix_hit_rate"] = sig6(m.prefix_hit_rate);
  if (m.verifies > 0)
    j["speculative"] = {{"verifies", m.verifies},
                        {"proposed", m.proposed},
                        {"accepted", m.accepted},
                        {"acceptance", sig6(m.acceptance_rate())},
                        {"tokens_per_verify", sig6(m.tokens_per_verify())}};
  return j;
}

json serve_json(const RunResult& r) {
  if (r.serve.empty()) return nullptr;
  json steps = json::array();
  for (const ServeStepResult& s : r.serve) steps.push_back(step_json(s));
  json j;
  j["traffic"] = r.traffic;
  j["steps"] = std::move(steps);
  return j;
}

}  // namespace perfsim
