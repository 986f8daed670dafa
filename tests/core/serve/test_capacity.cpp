// Capacity planning: the rate and users searches bracket the SLO's edge, the replica count and
// the cost per token follow their formulas, bad queries are refused, and the rule of thumb's
// formulas give hand-checked numbers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/serve/capacity.hpp"
#include "core/serve/simulate.hpp"
#include "core/serve/traffic.hpp"
#include "approx.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// A tiny model on an H100 whose steps cost 1 ms of host work each: a continuous engine of 8
// sequences completes about 8 tokens per millisecond, so the SLO's edge is a few hundred
// requests/s and every run takes milliseconds.
CapacityQuery tiny_query() {
  CapacityQuery q;
  q.model = test_models::tiny_llama();
  q.hardware = test_models::h100_node();
  q.hardware.host_overhead = 1e-3;
  q.hardware.memory_bytes = 1e9;  // a KV pool of tens of thousands of blocks, not millions
  q.traffic.requests = 200;
  q.traffic.seed = 7;
  q.traffic.arrivals.kind = ArrivalKind::poisson;
  q.traffic.arrivals.rate = 1;
  q.traffic.prompt.mean = 64;
  q.traffic.output.mean = 32;
  q.traffic.slo.ttft = 0.02;
  q.traffic.slo.tpot = 0.004;
  q.stack = {StackStep{"engine",
                       {PassSpec{"flash_attention", std::nullopt, std::nullopt},
                        PassSpec{"scheduler", std::nullopt, "continuous"}, PassSpec{"max_batch", 8.0, std::nullopt},
                        PassSpec{"paged_kv", std::nullopt, std::nullopt}},
                       ""}};
  return q;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The SLO verdict of the query's configuration at `rate`, simulated apart from the planner.
bool meets_at(const CapacityQuery& q, double rate) {
  ServeSpec spec = q.traffic;
  spec.arrivals.rate = rate;
  const auto requests = make_requests(spec, q.model.max_seq);
  return meets_slo(predict_serving(q.model, q.hardware, spec, requests, q.stack, q.stack.size() - 1).metrics,
                   q.attainment);
}

}  // namespace

TEST_CASE("capacity: the rate search brackets the highest rate that meets the SLO") {
  const CapacityQuery q = tiny_query();
  const CapacityResult r = plan_capacity(q);
  INFO(r.note);
  REQUIRE(r.max_rate > 0);
  REQUIRE(r.tried.size() >= 3);
  CHECK(r.tried.front().probe);
  CHECK_FALSE(r.tried.front().meets);
  CHECK(r.saturation_rate > 0);

  // The rate reported was tried and met the SLO; the lowest rate tried above it missed it, within
  // the tolerance.
  const auto at_max = std::find_if(r.tried.begin(), r.tried.end(), [&](const CapacityPoint& p) { return p.rate == r.max_rate; });
  REQUIRE(at_max != r.tried.end());
  CHECK(at_max->meets);
  double next_above = 0;
  for (const CapacityPoint& p : r.tried)
    if (!p.probe && p.rate > r.max_rate && (next_above == 0 || p.rate < next_above)) next_above = p.rate;
  REQUIRE(next_above > 0);
  const auto above = std::find_if(r.tried.begin(), r.tried.end(), [&](const CapacityPoint& p) { return p.rate == next_above; });
  CHECK_FALSE(above->meets);
  CHECK((next_above - r.max_rate) / r.max_rate < q.tolerance);

  // The verdicts hold when simulated apart from the search, and 10% more load misses the SLO.
  CHECK(meets_at(q, r.max_rate));
  CHECK_FALSE(meets_at(q, next_above));
  CHECK_FALSE(meets_at(q, 1.1 * r.max_rate));

  // Figures at the planned rate: the run's output throughput, about rate × mean output.
  CHECK(r.tokens_per_second_at_max == approx(at_max->metrics.output_throughput));
  CHECK(r.requests_per_second_at_max == approx(at_max->metrics.request_throughput));
  CHECK(r.note.find("met at") == 0);
}

TEST_CASE("capacity: the rate search keeps each run's requests and scales only their arrivals") {
  ServeSpec spec = tiny_query().traffic;
  spec.prompt.dist = spec.output.dist = LengthDist::lognormal;
  for (ArrivalKind kind : {ArrivalKind::poisson, ArrivalKind::gamma}) {
    spec.arrivals.kind = kind;
    spec.arrivals.burstiness = 0.5;
    spec.arrivals.rate = 10;
    const auto slow = make_requests(spec, 256);
    spec.arrivals.rate = 40;
    const auto fast = make_requests(spec, 256);
    REQUIRE(slow.size() == fast.size());
    for (std::size_t i = 0; i < slow.size(); ++i) {
      CHECK(slow[i].prompt == fast[i].prompt);
      CHECK(slow[i].output == fast[i].output);
      CHECK(fast[i].arrival == approx(slow[i].arrival / 4));
    }
  }
}

TEST_CASE("capacity: replicas for a target rate are ceil(target / max_rate)") {
  CHECK(replicas_for(10, 2.5) == 4);
  CHECK(replicas_for(10.1, 2.5) == 5);
  CHECK(replicas_for(1, 3) == 1);
  CHECK(replicas_for(0, 3) == 0);
  CHECK(replicas_for(5, 0) == 0);

  CapacityQuery q = tiny_query();
  q.target_rate = 5000;
  const CapacityResult r = plan_capacity(q);
  REQUIRE(r.max_rate > 0);
  CHECK(r.replicas == static_cast<int64_t>(std::ceil(5000 / r.max_rate)));
  CHECK(static_cast<double>(r.replicas) * r.max_rate >= 5000);
  CHECK(static_cast<double>(r.replicas - 1) * r.max_rate < 5000);
}

TEST_CASE("capacity: cost per million output tokens from the price per GPU-hour") {
  // $2 an hour at 1,000 tokens/s: 3.6 million tokens an hour, so $0.5556 a million.
  CHECK(cost_per_million_tokens(2.0, 1000) == approx(2.0 / 3.6e6 * 1e6));
  CHECK(cost_per_million_tokens(2.0, 1000) == approx(0.555556).epsilon(1e-5));
  CHECK(cost_per_million_tokens(0, 1000) == 0);  // price unknown
  CHECK(cost_per_million_tokens(2.0, 0) == 0);

  CapacityQuery q = tiny_query();
  q.hardware.price_per_hour = 2.0;
  const CapacityResult r = plan_capacity(q);
  REQUIRE(r.tokens_per_second_at_max > 0);
  CHECK(r.price_per_hour == 2.0);
  CHECK(r.cost_per_million_tokens == approx(2.0 / (r.tokens_per_second_at_max * 3600) * 1e6));
  q.hardware.price_per_hour = 0;
  CHECK(plan_capacity(q).cost_per_million_tokens == 0);
}

TEST_CASE("capacity: a replica of a TP2 engine counts, and pays for, its two GPUs") {
  CapacityQuery q = tiny_query();
  q.layout.tp = 2;
  q.target_rate = 5000;
  q.hardware.price_per_hour = 2.0;
  const CapacityResult r = plan_capacity(q);
  REQUIRE(r.max_rate > 0);
  CHECK(r.gpus_per_replica == 2);
  CHECK(r.gpus == 2 * r.replicas);
  // Both GPUs of the replica are paid for: $4 an hour over its tokens.
  CHECK(r.cost_per_million_tokens == approx(4.0 / (r.tokens_per_second_at_max * 3600) * 1e6));
  // Its engine is the TP2 engine the prediction serves with: the same rate meets the same SLO.
  ServeSpec spec = q.traffic;
  spec.arrivals.rate = r.max_rate;
  const auto requests = make_requests(spec, q.model.max_seq);
  ParallelSpec tp2;
  tp2.tp = 2;
  CHECK(meets_slo(predict_serving(q.model, q.hardware, spec, requests, q.stack, 0, tp2).metrics, q.attainment));
  // A one-GPU replica: one GPU.
  CHECK(plan_capacity(tiny_query()).gpus_per_replica == 1);
}

TEST_CASE("capacity: the users search brackets the most concurrent users one replica serves") {
  CapacityQuery q = tiny_query();
  const CapacityResult r = plan_users(q, 100);
  INFO(r.note);
  REQUIRE(r.users_per_replica > 0);
  REQUIRE(r.users_per_replica < 100);
  const auto at_max = std::find_if(r.tried.begin(), r.tried.end(), [&](const CapacityPoint& p) { return p.users == r.users_per_replica; });
  REQUIRE(at_max != r.tried.end());
  CHECK(at_max->meets);
  int64_t next_above = 0;
  for (const CapacityPoint& p : r.tried)
    if (p.users > r.users_per_replica && (next_above == 0 || p.users < next_above)) next_above = p.users;
  REQUIRE(next_above > 0);
  CHECK(next_above == r.users_per_replica + 1);  // 2% of a few dozen users rounds to one
  CHECK(r.replicas == (100 + r.users_per_replica - 1) / r.users_per_replica);
  for (const CapacityPoint& p : r.tried) CHECK(p.rate == 0);
}

TEST_CASE("capacity: queries that cannot be planned are refused") {
  CapacityQuery q = tiny_query();
  q.traffic.slo = Slo{};
  CHECK(error_of([&] { (void)plan_capacity(q); }).find("capacity planning needs slo = {ttft = ..., tpot = ...}") !=
        std::string::npos);
  CHECK(error_of([&] { (void)plan_users(q, 10); }).find("needs slo") != std::string::npos);

  q = tiny_query();
  q.traffic.arrivals.kind = ArrivalKind::closed;
  q.traffic.arrivals.users = 8;
  const std::string closed = error_of([&] { (void)plan_capacity(q); });
  CHECK(closed.find("poisson{} or gamma{}") != std::string::npos);
  CHECK(closed.find("users = N") != std::string::npos);
  q.traffic.arrivals.kind = ArrivalKind::ramp;
  CHECK(error_of([&] { (void)plan_capacity(q); }).find("poisson{} or gamma{}") != std::string::npos);

  q = tiny_query();
  CHECK(error_of([&] { (void)plan_users(q, 0); }).find("users must be >= 1") != std::string::npos);
  q.tolerance = 0;
  CHECK(error_of([&] { (void)plan_capacity(q); }).find("tolerance") != std::string::npos);
  q = tiny_query();
  q.low = 10, q.high = 5;
  CHECK(error_of([&] { (void)plan_capacity(q); }).find("low = 10 is above high = 5") != std::string::npos);
  q = tiny_query();
  q.attainment = 1.5;
  CHECK(error_of([&] { (void)plan_capacity(q); }).find("attainment") != std::string::npos);
}

TEST_CASE("capacity: the search reports when no rate meets the SLO") {
  CapacityQuery q = tiny_query();
  q.traffic.slo.tpot = 1e-4;  // below one step's host overhead: no load meets it
  q.max_iterations = 4;
  const CapacityResult r = plan_capacity(q);
  CHECK(r.max_rate == 0);
  CHECK(r.replicas == 0);
  CHECK(r.cost_per_million_tokens == 0);
  CHECK(r.tried.size() == 5);  // the probe and four halvings
  CHECK(r.note.find("no rate tried meets the SLO") == 0);
  CHECK(r.note.find("TPOT p99") != std::string::npos);
}

TEST_CASE("capacity: the rule of thumb's concurrency and decode throughput by hand") {
  RuleOfThumbInputs in;
  in.kv_budget_bytes = 10e9;
  in.kv_bytes_per_token = 1e6;
  in.mean_prompt = 800;
  in.mean_output = 200;
  in.weight_bytes = 2e9;
  in.memory_bandwidth = 2e12;
  in.max_batch = 256;
  const RuleOfThumb r = rule_of_thumb(in);
  // 1,000 tokens × 1 MB: 1 GB a request, 10 of them in 10 GB.
  CHECK(r.kv_bytes_per_request == approx(1e9));
  CHECK(r.max_concurrent == 10);
  CHECK(r.concurrency == 10);
  CHECK(r.users_per_gpu() == 10);
  CHECK(r.gpus_for_users(1000) == 100);
  CHECK(r.gpus_for_users(1001) == 101);
  // A step reads 2 GB of weights at 2 TB/s: 1 ms, 10 tokens each, 10,000 tokens/s, 50 requests/s.
  CHECK(r.decode_step_time == approx(1e-3));
  CHECK(r.decode_tokens_per_s == approx(1e4));
  CHECK(r.requests_per_s == approx(50));
  // With the KV read: 10 sequences × 900 tokens of context × 1 MB = 9 GB more, 5.5 ms a step.
  CHECK(r.decode_step_time_kv == approx(5.5e-3));
  CHECK(r.decode_tokens_per_s_kv == approx(10 / 5.5e-3));
  CHECK(r.gpus_for_rate(100) == static_cast<int64_t>(std::ceil(100 / (10 / 5.5e-3 / 200))));

  // The scheduler's cap on running sequences, and a reservation of max_seq without paged KV.
  in.max_batch = 4;
  CHECK(rule_of_thumb(in).concurrency == 4);
  in.max_batch = 0;
  in.reserve_tokens = 4096;
  const RuleOfThumb reserved = rule_of_thumb(in);
  CHECK(reserved.kv_bytes_per_request == approx(4.096e9));
  CHECK(reserved.max_concurrent == 2);  // floor(10 / 4.096)
}

TEST_CASE("capacity: the rule of thumb's inputs come from the model, stack and traffic") {
  const CapacityQuery q = tiny_query();
  const RuleOfThumb r = rule_of_thumb(q);
  const ModelConfig& m = q.model;
  // K and V per layer: 2 × kv_dim values per token, at the model's activation dtype.
  const double kv_values = 2.0 * static_cast<double>(m.layers * m.kv_dim());
  CHECK(std::fmod(r.inputs.kv_bytes_per_token, kv_values) == 0);
  CHECK(r.inputs.kv_bytes_per_token > 0);
  // The weights are at least the parameters at one byte each and the model is far from the KV budget.
  CHECK(r.inputs.weight_bytes >= static_cast<double>(m.params()));
  CHECK(r.inputs.kv_budget_bytes > 0.8 * q.hardware.memory_bytes);
  CHECK(r.inputs.mean_prompt == approx(64));
  CHECK(r.inputs.mean_output == approx(32));
  CHECK(r.inputs.reserve_tokens == 0);  // paged KV
  CHECK(r.concurrency == 8);            // max_batch, far below what the KV memory holds
}
