#include "core/serve/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace perfsim {

double percentile_linear(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

LatencyStats latency_stats(std::vector<double> values) {
  LatencyStats s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.median = percentile_linear(values, 50);
  s.p90 = percentile_linear(values, 90);
  s.p99 = percentile_linear(values, 99);
  s.max = values.back();
  return s;
}

ServeMetrics serve_metrics(const EngineRun& run, const Slo& slo) {
  ServeMetrics m;
  m.requests = static_cast<int64_t>(run.requests.size());
  m.preemptions = run.preemptions;
  m.batches = run.batches;
  m.kv_capped_batches = run.kv_capped_batches;
  m.kv_capped_smallest = run.kv_capped_smallest;
  m.verifies = run.verifies;
  m.proposed = run.proposed;
  m.accepted = run.accepted;
  m.steps = static_cast<int64_t>(run.steps.size());
  std::vector<double> ttft, tpot, e2e, queue;
  int64_t good = 0, prompt_tokens = 0, cached_tokens = 0;
  for (const RequestRecord& r : run.requests) {
    if (!r.rejected.empty()) {
      ++m.rejected;
      continue;
    }
    ++m.completed;
    m.input_tokens += r.request.prompt;
    m.output_tokens += r.generated;
    prompt_tokens += r.request.prompt;
    cached_tokens += r.cached_tokens;
    const double first = r.first_token - r.request.arrival;
    const double total = r.finished - r.request.arrival;
    ttft.push_back(first);
    e2e.push_back(total);
    queue.push_back(r.admitted - r.request.arrival);
    double per_token = 0;
    if (r.generated > 1) {
      per_token = (total - first) / static_cast<double>(r.generated - 1);
      tpot.push_back(per_token);
    }
    const bool meets = (slo.ttft <= 0 || first <= slo.ttft) && (slo.tpot <= 0 || per_token <= slo.tpot) &&
                       (slo.e2e <= 0 || total <= slo.e2e);
    good += meets ? 1 : 0;
  }
  m.ttft = latency_stats(std::move(ttft));
  m.tpot = latency_stats(std::move(tpot));
  m.itl = latency_stats(run.itl);
  m.e2e = latency_stats(std::move(e2e));
  m.queue = latency_stats(std::move(queue));
  // The run starts at time 0 (the first request may arrive later, as in vLLM's benchmark).
  m.duration = run.end;
  if (m.duration > 0) {
    m.request_throughput = static_cast<double>(m.completed) / m.duration;
    m.output_throughput = static_cast<double>(m.output_tokens) / m.duration;
    m.total_token_throughput = static_cast<double>(m.input_tokens + m.output_tokens) / m.duration;
    m.goodput = static_cast<double>(good) / m.duration;
  }
  m.slo_attainment = m.completed > 0 ? static_cast<double>(good) / static_cast<double>(m.completed) : 0;
  m.prefix_hit_rate = prompt_tokens > 0 ? static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens) : 0;
  double busy = 0, seqs = 0, tokens = 0, kv = 0;
  for (const StepRecord& s : run.steps) {
    busy += s.duration;
    seqs += s.seqs;
    tokens += s.tokens;
    const double used = run.pool.blocks > 0 ? static_cast<double>(s.kv_used_blocks) / static_cast<double>(run.pool.blocks) : 0;
    kv += used * s.duration;
    m.kv_utilization_max = std::max(m.kv_utilization_max, used);
  }
  if (!run.steps.empty()) {
    const auto n = static_cast<double>(run.steps.size());
    m.mean_batch = seqs / n;
    m.mean_step_tokens = tokens / n;
    m.mean_step_time = busy / n;
  }
  if (busy > 0) m.kv_utilization_mean = kv / busy;
  return m;
}


}  // namespace perfsim
