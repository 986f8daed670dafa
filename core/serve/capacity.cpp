#include "core/serve/capacity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>

#include "core/errors.hpp"
#include "core/serve/scheduler_config.hpp"
#include "core/serve/simulate.hpp"
#include "core/serve/step_price.hpp"
#include "core/serve/traffic.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

// The saturation probe's arrival rate: every request arrives within microseconds, so the run
// measures how fast the engine completes a backlog.
constexpr double kProbeRate = 1e6;
// plan_users: requests per user in each run, the first of which is the ramp-up left out.
constexpr int64_t kRoundsPerUser = 4;

const std::vector<StackStep>& stack_of(const CapacityQuery& q) {
  static const std::vector<StackStep> baseline = {StackStep{"baseline", {}, ""}};
  return q.stack.empty() ? baseline : q.stack;
}

bool has_slo(const Slo& s) { return s.ttft > 0 || s.tpot > 0 || s.e2e > 0; }

void check_query(const CapacityQuery& q) {
  const std::string& where = q.traffic.where;
  if (!has_slo(q.traffic.slo))
    throw ConfigError(where + "capacity planning needs slo = {ttft = ..., tpot = ...} in serve{} (seconds; the "
                              "load a replica serves is the highest that still meets it)");
  auto fail = [&](const std::string& what) { throw ConfigError(where + "capacity planning: " + what); };
  if (!(q.tolerance > 0 && q.tolerance < 1)) fail(fmt::format("tolerance must be in (0, 1) (got {})", q.tolerance));
  if (q.max_iterations < 1) fail(fmt::format("max_iterations must be >= 1 (got {})", q.max_iterations));
  if (!(q.attainment > 0 && q.attainment <= 1))
    fail(fmt::format("attainment must be a share of requests in (0, 1] (got {})", q.attainment));
  if (!(q.target_rate >= 0 && std::isfinite(q.target_rate)))
    fail(fmt::format("target_rate must be >= 0 requests/s (got {})", q.target_rate));
  if (!(q.low >= 0 && std::isfinite(q.low)) || !(q.high >= 0 && std::isfinite(q.high)))
    fail(fmt::format("low and high must be >= 0 requests/s (0 = automatic; got {} and {})", q.low, q.high));
  if (q.low > 0 && q.high > 0 && q.low > q.high) fail(fmt::format("low = {} is above high = {}", q.low, q.high));
}

// Each bound's p99 beside the SLO, for notes: "TTFT p99 1.2 s > 0.5 s".
std::string misses(const ServeMetrics& m, const Slo& slo) {
  std::vector<std::string> parts;
  if (m.rejected > 0) parts.push_back(fmt::format("{} requests rejected", m.rejected));
  auto bound = [&](const char* name, const LatencyStats& s, double limit) {
    if (limit > 0 && s.count > 0 && s.p99 > limit)
      parts.push_back(fmt::format("{} p99 {} > {}", name, format_duration(s.p99), format_duration(limit)));
  };
  bound("TTFT", m.ttft, slo.ttft);
  bound("TPOT", m.tpot, slo.tpot);
  bound("E2E", m.e2e, slo.e2e);
  parts.push_back(fmt::format("{:.1f}% met the SLO", 100 * m.slo_attainment));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// One engine's layout: the query's tp and pp, one replica.
ParallelSpec engine_layout(const CapacityQuery& q) {
  ParallelSpec p;
  p.tp = std::max(1, q.layout.tp);
  p.pp = std::max(1, q.layout.pp);
  return p;
}

// GPUs of one replica: its engines' (P + D with disaggregation) tp × pp each.
int replica_gpus(const CapacityQuery& q) {
  const std::vector<StackStep>& stack = stack_of(q);
  const SchedulerConfig c = scheduler_config(stack, stack.size() - 1);
  const ParallelSpec e = engine_layout(q);
  return (c.disaggregated() ? c.prefill_engines + c.decode_engines : 1) * e.tp * e.pp;
}

// Runs the stack's last step over `spec`'s requests.
ServePrediction simulate(const CapacityQuery& q, const ServeSpec& spec) {
  const std::vector<StackStep>& stack = stack_of(q);
  const std::vector<Request> requests = make_requests(spec, q.model.max_seq);
  return predict_serving(q.model, q.hardware, spec, requests, stack, stack.size() - 1, engine_layout(q));
}

// The run's figures without the requests of ids below `skip` in its latencies and SLO
// attainment; throughputs stay those of the whole run.
ServeMetrics without_first(ServePrediction p, int64_t skip, const Slo& slo) {
  std::vector<RequestRecord>& records = p.run.requests;
  records.erase(records.begin(), records.begin() + std::min<std::ptrdiff_t>(skip, std::ssize(records)));
  ServeMetrics m = serve_metrics(p.run, slo);
  const ServeMetrics& all = p.metrics;
  m.duration = all.duration;
  m.request_throughput = all.request_throughput;
  m.output_throughput = all.output_throughput;
  m.total_token_throughput = all.total_token_throughput;
  m.goodput = all.request_throughput * m.slo_attainment;
  m.rejected = all.rejected;
  return m;
}

void finish(CapacityResult& out, const CapacityQuery& q, int best) {
  out.price_per_hour = q.hardware.price_per_hour;
  out.gpus_per_replica = replica_gpus(q);
  out.gpus = out.replicas * out.gpus_per_replica;
  if (best < 0) return;
  const ServeMetrics& m = out.tried[static_cast<std::size_t>(best)].metrics;
  out.tokens_per_second_at_max = m.output_throughput;
  out.requests_per_second_at_max = m.request_throughput;
  // Every GPU of the replica is paid for.
  out.cost_per_million_tokens = cost_per_million_tokens(out.price_per_hour * out.gpus_per_replica, m.output_throughput);
}

}  // namespace

bool meets_slo(const ServeMetrics& m, double attainment) {
  return m.requests > 0 && m.rejected == 0 && m.completed == m.requests && m.slo_attainment >= attainment;
}

int64_t replicas_for(double demand, double per_replica) {
  if (!(demand > 0) || !(per_replica > 0)) return 0;
  // A hair of slack so 10 / 2.5 is 4 replicas, not 5 after rounding.
  return static_cast<int64_t>(std::ceil(demand / per_replica * (1 - 1e-12)));
}

double cost_per_million_tokens(double price_per_hour, double tokens_per_second) {
  if (!(price_per_hour > 0) || !(tokens_per_second > 0)) return 0;
  return price_per_hour / (tokens_per_second * 3600) * 1e6;
}

int64_t RuleOfThumb::gpus_for_users(int64_t users) const {
  return replicas_for(static_cast<double>(users), concurrency) * std::max(1, inputs.gpus_per_engine);
}

int64_t RuleOfThumb::gpus_for_rate(double rate) const {
  return replicas_for(rate, requests_per_s_kv) * std::max(1, inputs.gpus_per_engine);
}

RuleOfThumb rule_of_thumb(const RuleOfThumbInputs& in) {
  RuleOfThumb r;
  r.inputs = in;
  const double tokens = in.reserve_tokens > 0 ? in.reserve_tokens : in.mean_prompt + in.mean_output;
  r.kv_bytes_per_request = in.kv_bytes_per_token * tokens;
  if (r.kv_bytes_per_request > 0) r.max_concurrent = std::floor(std::max(0.0, in.kv_budget_bytes) / r.kv_bytes_per_request);
  r.concurrency = in.max_batch > 0 ? std::min(r.max_concurrent, static_cast<double>(in.max_batch)) : r.max_concurrent;
  if (in.memory_bandwidth <= 0) return r;
  r.decode_step_time = in.weight_bytes / in.memory_bandwidth;
  // A running sequence has generated half its output on average.
  const double context = in.mean_prompt + in.mean_output / 2;
  r.decode_step_time_kv = (in.weight_bytes + r.concurrency * in.kv_bytes_per_token * context) / in.memory_bandwidth;
  if (r.decode_step_time > 0) r.decode_tokens_per_s = r.concurrency / r.decode_step_time;
  if (r.decode_step_time_kv > 0) r.decode_tokens_per_s_kv = r.concurrency / r.decode_step_time_kv;
  if (in.mean_output > 0) {
    r.requests_per_s = r.decode_tokens_per_s / in.mean_output;
    r.requests_per_s_kv = r.decode_tokens_per_s_kv / in.mean_output;
  }
  return r;
}

RuleOfThumb rule_of_thumb(const CapacityQuery& q) {
  const std::vector<StackStep>& stack = stack_of(q);
  const std::size_t upto = stack.size() - 1;
  const SchedulerConfig c = scheduler_config(stack, upto);
  StepPricer pricer(q.model, q.hardware, stack, upto, engine_layout(q));
  RuleOfThumbInputs in;
  in.gpus_per_engine = engine_layout(q).tp * engine_layout(q).pp;
  // What the engine holds besides the KV cache at a one-token step: the weights, and a
  // one-token step's activations, which are negligible beside them.
  in.weight_bytes = pricer.memory_besides_kv(1);
  // As kv_pool sizes the pool: the engine's share of the memory less what its largest step holds.
  in.kv_budget_bytes =
      std::max(0.0, c.gpu_memory * q.hardware.memory_bytes - pricer.memory_besides_kv(c.step_tokens(q.model.max_seq), c.max_batch));
  in.kv_bytes_per_token = pricer.kv_bytes_per_token();
  const std::vector<Request> requests = make_requests(q.traffic, q.model.max_seq);
  double prompt = 0, output = 0;
  for (const Request& r : requests) prompt += static_cast<double>(r.prompt), output += static_cast<double>(r.output);
  if (!requests.empty()) {
    in.mean_prompt = prompt / static_cast<double>(requests.size());
    in.mean_output = output / static_cast<double>(requests.size());
  }
  in.reserve_tokens = c.paged ? 0 : static_cast<double>(q.model.max_seq);
  in.memory_bandwidth = q.hardware.memory_bandwidth;
  in.max_batch = c.max_batch;
  return rule_of_thumb(in);
}

CapacityResult plan_capacity(const CapacityQuery& q) {
  const ArrivalKind kind = q.traffic.arrivals.kind;
  if (kind != ArrivalKind::poisson && kind != ArrivalKind::gamma)
    throw ConfigError(q.traffic.where +
                      "capacity planning searches the arrival rate, so the traffic's arrivals must be poisson{} or "
                      "gamma{}; for concurrent users (closed{}) ask for users = N instead");
  check_query(q);
  CapacityResult out;
  out.rule_of_thumb = rule_of_thumb(q);
  auto run = [&](double rate) {
    ServeSpec spec = q.traffic;
    spec.arrivals.rate = rate;
    CapacityPoint p;
    p.rate = rate;
    p.metrics = simulate(q, spec).metrics;
    p.meets = meets_slo(p.metrics, q.attainment);
    out.tried.push_back(p);
    return p.meets;
  };

  double start = q.low;
  if (start <= 0 && q.high > 0) start = q.high / 2;
  if (start <= 0) {
    const bool probe_meets = run(kProbeRate);
    out.tried.back().probe = true;
    out.saturation_rate = out.tried.back().metrics.request_throughput;
    if (probe_meets || out.saturation_rate <= 0) {
      out.max_rate = probe_meets ? out.saturation_rate : 0;
      out.note = probe_meets ? fmt::format("the SLO holds even with every request sent at once: the replica is bounded "
                                           "by its throughput, {} requests/s",
                                           format_sig3(out.saturation_rate))
                             : "the probe completed no request";
      out.replicas = replicas_for(q.target_rate, out.max_rate);
      finish(out, q, probe_meets ? 0 : -1);
      return out;
    }
    start = 0.5 * out.saturation_rate;
  }
  if (q.high > 0) start = std::min(start, q.high);

  // lo: the highest rate that met the SLO, hi: the lowest that missed it (0 = none yet).
  double lo = 0, hi = 0;
  int best = -1, runs = 0;
  double rate = start;
  while (runs < q.max_iterations) {
    ++runs;
    if (run(rate)) {
      lo = rate;
      best = static_cast<int>(out.tried.size()) - 1;
      if (hi > 0 || (q.high > 0 && rate >= q.high)) break;
      rate = q.high > 0 ? std::min(2 * rate, q.high) : 2 * rate;
    } else {
      hi = rate;
      if (lo > 0 || (q.low > 0 && rate <= q.low)) break;
      rate = q.low > 0 ? std::max(rate / 2, q.low) : rate / 2;
    }
  }
  while (lo > 0 && hi > 0 && (hi - lo) / lo >= q.tolerance && runs < q.max_iterations) {
    ++runs;
    const double mid = (lo + hi) / 2;
    if (run(mid)) {
      lo = mid;
      best = static_cast<int>(out.tried.size()) - 1;
    } else {
      hi = mid;
    }
  }

  out.max_rate = lo;
  out.replicas = replicas_for(q.target_rate, lo);
  if (lo <= 0) {
    const CapacityPoint& last = out.tried.back();
    out.note = fmt::format("no rate tried meets the SLO: at {} requests/s, the lowest tried, {}", format_sig3(last.rate),
                           misses(last.metrics, q.traffic.slo));
  } else if (hi <= 0) {
    out.note = fmt::format("the SLO still holds at {} requests/s, the highest tried{}", format_sig3(lo),
                           q.high > 0 ? " (high)" : "; raise max_iterations or give high");
  } else {
    const auto missed = std::find_if(out.tried.begin(), out.tried.end(), [&](const CapacityPoint& p) { return p.rate == hi; });
    out.note = fmt::format("met at {} requests/s, missed at {} ({}) after {} runs", format_sig3(lo), format_sig3(hi),
                           misses(missed->metrics, q.traffic.slo), runs);
    if ((hi - lo) / lo >= q.tolerance)
      out.note += fmt::format("; stopped at max_iterations with the bracket {:.1f}% wide", 100 * (hi - lo) / lo);
  }
  finish(out, q, best);
  return out;
}

CapacityResult plan_users(const CapacityQuery& q, int64_t users) {
  if (users < 1) throw ConfigError(q.traffic.where + fmt::format("capacity planning: users must be >= 1 (got {})", users));
  if (q.traffic.arrivals.kind == ArrivalKind::trace)
    throw ConfigError(q.traffic.where +
                      "capacity planning for users draws closed-loop requests; a trace's requests cannot be replayed "
                      "by a varying number of users (describe its lengths with lengths{} instead)");
  check_query(q);
  CapacityResult out;
  out.rule_of_thumb = rule_of_thumb(q);
  auto run = [&](int64_t u) {
    ServeSpec spec = q.traffic;
    spec.arrivals.kind = ArrivalKind::closed;
    spec.arrivals.users = u;
    spec.requests = std::max(spec.requests, kRoundsPerUser * u);
    CapacityPoint p;
    p.users = u;
    p.metrics = without_first(simulate(q, spec), u, spec.slo);
    p.meets = meets_slo(p.metrics, q.attainment);
    out.tried.push_back(p);
    return p.meets;
  };

  int64_t lo = 0, hi = 0;  // the most users that met the SLO, the fewest that missed it
  int best = -1, runs = 0;
  int64_t u = std::clamp<int64_t>(std::llround(out.rule_of_thumb.concurrency), 1, users);
  while (runs < q.max_iterations) {
    ++runs;
    if (run(u)) {
      lo = u;
      best = static_cast<int>(out.tried.size()) - 1;
      if (hi > 0 || u >= users) break;
      u = std::min(2 * u, users);
    } else {
      hi = u;
      if (lo > 0 || u <= 1) break;
      u = std::max<int64_t>(u / 2, 1);
    }
  }
  auto open = [&] { return lo > 0 && hi > 0 && hi - lo > std::max<int64_t>(1, static_cast<int64_t>(q.tolerance * static_cast<double>(lo))); };
  while (open() && runs < q.max_iterations) {
    ++runs;
    const int64_t mid = lo + (hi - lo) / 2;
    if (run(mid)) {
      lo = mid;
      best = static_cast<int>(out.tried.size()) - 1;
    } else {
      hi = mid;
    }
  }

  out.users_per_replica = lo;
  out.replicas = replicas_for(static_cast<double>(users), static_cast<double>(lo));
  if (lo <= 0) {
    out.note = fmt::format("not even one user meets the SLO: {}", misses(out.tried.back().metrics, q.traffic.slo));
  } else if (hi <= 0) {
    out.note = fmt::format("one replica serves all {} users within the SLO", users);
  } else {
    const auto missed = std::find_if(out.tried.begin(), out.tried.end(), [&](const CapacityPoint& p) { return p.users == hi; });
    out.note = fmt::format("met with {} users, missed with {} ({}) after {} runs", lo, hi,
                           misses(missed->metrics, q.traffic.slo), runs);
    if (open()) out.note += "; stopped at max_iterations before the bracket closed";
  }
  finish(out, q, best);
  return out;
}

}  // namespace perfsim
