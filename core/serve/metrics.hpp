// Serving figures with the definitions of vLLM's benchmark (benchmarks/serve), so they compare
// with `vllm bench serve` output: TTFT, TPOT = (E2E − TTFT) / (output − 1) per request of more
// than one output token, ITL pooled over every gap between tokens, E2E; percentiles by linear
// interpolation (numpy's default); throughputs over the run's duration (its start to the last
// token); goodput = requests meeting every SLO per second.
#pragma once
#include <cstdint>
#include <vector>

#include "core/serve/engine.hpp"
#include "core/config/serve.hpp"
#include "core/config/workload.hpp"

namespace perfsim {

struct LatencyStats {
  int64_t count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, max = 0;  // seconds
};

// Linear-interpolation percentile of sorted values (q in [0, 100]); NaN when empty.
[[nodiscard]] double percentile_linear(const std::vector<double>& sorted, double q);
[[nodiscard]] LatencyStats latency_stats(std::vector<double> values);

struct ServeMetrics {
  int64_t requests = 0, completed = 0, rejected = 0, preemptions = 0, steps = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // of completed requests
  double duration = 0;                          // seconds
  double request_throughput = 0;                // completed requests/s
  double output_throughput = 0;                 // output tokens/s
  double total_token_throughput = 0;            // (input + output) tokens/s
  LatencyStats ttft, tpot, itl, e2e, queue;     // queue: arrival to first scheduled
  double goodput = 0;                           // requests/s meeting the SLO (= throughput without one)
  double slo_attainment = 1;                    // fraction of completed requests meeting it
  double mean_batch = 0;                        // sequences per step
  double mean_step_tokens = 0;
  double mean_step_time = 0;                    // seconds
  double kv_utilization_mean = 0;               // used blocks / pool, time-weighted
  double kv_utilization_max = 0;
  double prefix_hit_rate = 0;                   // prompt tokens found cached / prompt tokens
  // Static and dynamic batching (EngineRun): batches, those the KV pool held below max_batch.
  int64_t batches = 0, kv_capped_batches = 0, kv_capped_smallest = 0;
  // Speculative decoding: verify passes, draft tokens checked and accepted; the tokens a verify
  // pass yields on average (its accepted drafts and the token after them).
  int64_t verifies = 0, proposed = 0, accepted = 0;
  [[nodiscard]] double acceptance_rate() const {
    return proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0;
  }
  [[nodiscard]] double tokens_per_verify() const {
    return verifies > 0 ? static_cast<double>(accepted + verifies) / static_cast<double>(verifies) : 0;
  }
};

[[nodiscard]] ServeMetrics serve_metrics(const EngineRun& run, const Slo& slo);

// speculative_tokens_per_step: core/config/workload.hpp.

}  // namespace perfsim
