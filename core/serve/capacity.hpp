// Capacity planning over the serving simulation: the highest arrival rate (plan_capacity) or
// the most concurrent users (plan_users) one replica serves within the SLO, the replicas a
// demand needs, and what a million output tokens cost at that load; with the
// back-of-the-envelope estimate engineers make beside it (rule_of_thumb).
//
// The SLO rule: a run meets the SLO when every request was served (none rejected) and at least
// `attainment` of them (0.99 by default) met every bound the SLO sets (ttft, tpot, e2e) at
// once: ServeMetrics::slo_attainment, the share goodput counts. That is stricter than checking
// each metric's p99 on its own, since the 1% missing the TTFT bound need not be the 1% missing
// the TPOT bound.
//
// A replica is the stack's last step's engine, as predict_serving runs it: one GPU, an engine of
// tp × pp GPUs (`layout`), or with prefill_engines and decode_engines, P + D such engines.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/passes/passes.hpp"
#include "core/serve/metrics.hpp"
#include "core/config/model.hpp"
#include "core/config/serve.hpp"

namespace perfsim {

struct CapacityQuery {
  ModelConfig model;
  Hardware hardware;
  // Lengths, seed, request count and SLO of every run; plan_capacity replaces the arrival rate
  // (poisson or gamma arrivals), plan_users the closed loop's users (its think time is kept).
  ServeSpec traffic;
  std::vector<StackStep> stack;  // steps 0..n-1 applied; the last is the configuration planned
  ParallelSpec layout;           // each engine's tp and pp (dp is what the plan finds)
  double target_rate = 0;        // requests/s the fleet must serve (0 = none)
  double low = 0, high = 0;      // rate search bounds, requests/s (0 = automatic)
  double tolerance = 0.02;       // the rate search stops when (hi - lo) / lo is below it
  int max_iterations = 20;       // simulated runs of the search, the saturation probe aside
  double attainment = 0.99;      // share of requests that must meet every SLO bound
};

struct CapacityPoint {
  double rate = 0;     // arrival rate of the run (plan_users: 0)
  int64_t users = 0;   // closed-loop users of the run (plan_capacity: 0)
  ServeMetrics metrics;
  bool meets = false;
  bool probe = false;  // the saturation probe (every request at once), not a candidate rate
};

// The estimate beside the simulation: KV memory bounds how many requests run at once, and a
// decode step reads every weight once, so it lasts about weights / memory bandwidth whatever
// the batch. Prefill, compute limits, scheduling and queueing are left out.
struct RuleOfThumbInputs {
  double weight_bytes = 0;        // bytes a decode step reads for the weights
  double kv_budget_bytes = 0;     // memory the engine may fill with KV cache
  double kv_bytes_per_token = 0;  // over all layers
  double mean_prompt = 0, mean_output = 0;  // tokens
  // Tokens of KV each running sequence reserves whatever its length (an engine without
  // paged_kv reserves max_seq); 0: it holds its own length, mean prompt + output.
  double reserve_tokens = 0;
  double memory_bandwidth = 0;    // bytes/s
  int64_t max_batch = 0;          // the scheduler's cap on running sequences (0 = none)
  // GPUs of one engine (tp × pp): the figures above are one GPU's share of the engine, which
  // holds every running sequence's share; its concurrency is the engine's.
  int gpus_per_engine = 1;
};

struct RuleOfThumb {
  RuleOfThumbInputs inputs;
  double kv_bytes_per_request = 0;  // kv_bytes_per_token × (reserve_tokens, else prompt + output)
  double max_concurrent = 0;        // floor(kv_budget / kv_bytes_per_request)
  double concurrency = 0;           // max_concurrent, capped at max_batch
  double decode_step_time = 0;      // weight_bytes / bandwidth (seconds)
  double decode_tokens_per_s = 0;   // concurrency / decode_step_time: output tokens/s per GPU
  double requests_per_s = 0;        // decode_tokens_per_s / mean_output: each request holds a
                                    // slot for mean_output steps
  // The same with the KV cache read too: each running sequence reads its context, on average
  // mean_prompt + mean_output / 2 tokens, every step.
  double decode_step_time_kv = 0;
  double decode_tokens_per_s_kv = 0;
  double requests_per_s_kv = 0;

  // Users one GPU serves (each holds a running sequence) and GPUs for `users` or `rate`.
  [[nodiscard]] double users_per_gpu() const { return concurrency / std::max(1, inputs.gpus_per_engine); }
  [[nodiscard]] int64_t gpus_for_users(int64_t users) const;
  [[nodiscard]] int64_t gpus_for_rate(double rate) const;  // at requests_per_s_kv
};

// The formulas above on given inputs (hand-checkable); the inputs for a query come from its
// model, stack, hardware and traffic (weights: the memory model's bytes besides the KV cache
// at a one-token step; KV budget: as the engine sizes its pool; means: the requests drawn).
[[nodiscard]] RuleOfThumb rule_of_thumb(const RuleOfThumbInputs& in);
[[nodiscard]] RuleOfThumb rule_of_thumb(const CapacityQuery& q);

struct CapacityResult {
  double max_rate = 0;            // plan_capacity: requests/s one replica serves within the SLO
  int64_t users_per_replica = 0;  // plan_users: concurrent users one replica serves within it
  int64_t replicas = 0;           // replicas the demand needs (0 when none was asked for)
  int gpus_per_replica = 1;       // the GPUs of one replica (its engines' tp × pp GPUs)
  int64_t gpus = 0;               // replicas × gpus_per_replica
  std::vector<CapacityPoint> tried;  // every run, in order (the saturation probe first)
  double saturation_rate = 0;     // requests/s of the probe that sends every request at once
  double tokens_per_second_at_max = 0;    // output tokens/s per replica at the planned load
  double requests_per_second_at_max = 0;  // completed requests/s per replica there
  double price_per_hour = 0;              // the hardware's, USD per GPU-hour (0 = unknown)
  double cost_per_million_tokens = 0;     // USD per million output tokens over the replica's GPUs
                                          // (0 = price unknown)
  RuleOfThumb rule_of_thumb;
  std::string note;               // how the search ended
};

// Rate search: a probe with every request at once estimates the engine's saturation rate; the
// search starts at half of it (or at `low`), doubles the rate until the SLO fails (halves it
// until the SLO holds when the start fails), then bisects until (hi - lo) / lo < tolerance.
// Every run draws the same requests (same seed: lengths are drawn apart from arrivals, and the
// gaps scale with 1 / rate), so only the arrival times change. Throws ConfigError for arrivals
// other than poisson or gamma, or a traffic without an SLO.
[[nodiscard]] CapacityResult plan_capacity(const CapacityQuery& q);

// Users search: closed-loop runs of u users (each sends its next request `think` seconds
// after its last completed, the traffic's think time), u searched over whole numbers from the
// rule of thumb's concurrency, doubling or halving to a bracket and bisecting until the
// bracket is max(1, floor(tolerance × lo)) users wide, never above `users`;
// replicas = ceil(users / users per replica). Each run draws at least
// 4 requests per user, and its latencies and SLO attainment leave out the first round (every
// user's first request, all sent at time 0: the ramp-up a load test discards); its
// throughputs cover the whole run.
[[nodiscard]] CapacityResult plan_users(const CapacityQuery& q, int64_t users);

// Whether a run meets the SLO (the rule above).
[[nodiscard]] bool meets_slo(const ServeMetrics& m, double attainment);
// ceil(demand / per_replica), 0 when either is not positive.
[[nodiscard]] int64_t replicas_for(double demand, double per_replica);
// USD per million output tokens: price_per_hour / (tokens_per_second × 3600) × 1e6; 0 when
// either is not positive.
[[nodiscard]] double cost_per_million_tokens(double price_per_hour, double tokens_per_second);

}  // namespace perfsim
