// perfsim.capacity{scenario = s, target_rate = 500} (the highest request rate one replica serves
// within the SLO, and the replicas for the target) or {scenario = s, users = 1000} (the most
// concurrent users one replica serves, and the replicas for all of them). Returns a table of
// the plan, every run tried and the rule of thumb beside it.
#include "dsl/lua_capacity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/errors.hpp"
#include "core/serve/capacity.hpp"
#include "dsl/lua_catalog.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_scenario.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace {

constexpr const char* capacity_what = "perfsim.capacity{}";


Hardware read_hardware(lua_State* L, const FieldReader& f, const Scenario& s) {
  Hardware hw;
  const int type = f.push("hardware");
  if (type == LUA_TSTRING) {
    hw = lookup_hardware(L, lua_tostring(L, -1));
  } else if (type == LUA_TTABLE) {
    hw = to_hardware(L, -1, fmt::format("{} hardware", capacity_what));
  } else if (type == LUA_TNIL) {
    if (s.hardware.empty())
      throw ConfigError(fmt::format("{}: the scenario lists no hardware; give hardware = \"A100-80GB\"", capacity_what));
    hw = s.hardware.front();
  } else {
    lua_pop(L, 1);
    throw ConfigError(fmt::format("{}: hardware must be a catalog name or a hardware table", capacity_what));
  }
  lua_pop(L, 1);
  // A calibrated profile prices like the catalog entry it refines.
  if (hw.price_per_hour <= 0 && !hw.base.empty()) {
    try {
      hw.price_per_hour = lookup_hardware(L, hw.base).price_per_hour;
    } catch (const ConfigError&) {
      // A base outside the catalog leaves the price unknown.
    }
  }
  return hw;
}

void push_point(lua_State* L, const CapacityPoint& p) {
  const ServeMetrics& m = p.metrics;
  lua_createtable(L, 0, 14);
  if (p.rate > 0) set_number(L, "rate", p.rate);
  if (p.users > 0) set_number(L, "users", static_cast<double>(p.users));
  set_bool(L, "meets", p.meets);
  if (p.probe) set_bool(L, "probe", true);
  set_number(L, "ttft_p50", m.ttft.median);
  set_number(L, "ttft_p99", m.ttft.p99);
  set_number(L, "tpot_p50", m.tpot.median);
  set_number(L, "tpot_p99", m.tpot.p99);
  set_number(L, "e2e_p50", m.e2e.median);
  set_number(L, "e2e_p99", m.e2e.p99);
  set_number(L, "slo_attainment", m.slo_attainment);
  set_number(L, "request_throughput", m.request_throughput);
  set_number(L, "output_throughput", m.output_throughput);
  set_number(L, "mean_batch", m.mean_batch);
  set_number(L, "rejected", static_cast<double>(m.rejected));
}

void push_rule(lua_State* L, const RuleOfThumb& r) {
  const RuleOfThumbInputs& in = r.inputs;
  lua_createtable(L, 0, 18);
  set_number(L, "weight_bytes", in.weight_bytes);
  set_number(L, "kv_budget_bytes", in.kv_budget_bytes);
  set_number(L, "kv_bytes_per_token", in.kv_bytes_per_token);
  set_number(L, "mean_prompt", in.mean_prompt);
  set_number(L, "mean_output", in.mean_output);
  set_number(L, "reserve_tokens", in.reserve_tokens);
  set_number(L, "kv_bytes_per_request", r.kv_bytes_per_request);
  set_number(L, "max_concurrent", r.max_concurrent);
  set_number(L, "concurrency", r.concurrency);
  set_number(L, "users_per_gpu", r.users_per_gpu());
  set_number(L, "decode_step_time", r.decode_step_time);
  set_number(L, "decode_tokens_per_s", r.decode_tokens_per_s);
  set_number(L, "requests_per_s", r.requests_per_s);
  set_number(L, "decode_step_time_kv", r.decode_step_time_kv);
  set_number(L, "decode_tokens_per_s_kv", r.decode_tokens_per_s_kv);
  set_number(L, "requests_per_s_kv", r.requests_per_s_kv);
}

}  // namespace

int api_capacity(lua_State* L) {
  if (context(L).settings.options_only) throw StopScript{};
  if (!context(L).settings.measure_and_search_allowed)
    throw ConfigError("perfsim.capacity{}: capacity planning is turned off for this load");
  if (!lua_istable(L, 1))
    throw ConfigError(fmt::format("{} expects a table {{scenario = s, target_rate = 500}} or {{scenario = s, users = "
                                  "1000}} (got {})",
                                  capacity_what, describe_value(L, 1)));
  const FieldReader f(L, 1, capacity_what,
                      {"scenario", "target_rate", "users", "think", "requests", "hardware", "price_per_hour", "low",
                       "high", "tolerance", "max_iterations", "attainment"});
  const Scenario s = scenario_field(L, f, capacity_what);
  if (!s.serve)
    throw ConfigError(fmt::format("{} plans serving: the scenario's workload must be serve{{...}} with an slo", capacity_what));

  CapacityQuery q;
  q.model = s.model;
  q.hardware = read_hardware(L, f, s);
  q.traffic = *s.serve;
  q.traffic.where.clear();  // errors name the perfsim.capacity{} call already
  q.stack = s.stacks;
  // The replica: the last step's engine (its tp and pp); the plan finds how many.
  q.layout = step_parallel(s.parallel, s.stacks, s.stacks.empty() ? 0 : s.stacks.size() - 1);
  q.layout.dp = 1;
  f.read("target_rate", q.target_rate);
  f.read("low", q.low);
  f.read("high", q.high);
  f.read("tolerance", q.tolerance);
  f.read("attainment", q.attainment);
  q.max_iterations = static_cast<int>(std::clamp<int64_t>(f.integer("max_iterations").value_or(20), 0, 1000));
  if (const auto n = f.integer("requests")) {
    if (*n < 1) throw ConfigError(fmt::format("{}: requests must be >= 1 (got {})", capacity_what, *n));
    q.traffic.requests = *n;
  }
  if (const auto price = f.number("price_per_hour")) {
    if (!(*price >= 0)) throw ConfigError(fmt::format("{}: price_per_hour must be >= 0 USD", capacity_what));
    q.hardware.price_per_hour = *price;
  }
  const std::optional<int64_t> users = f.integer("users");
  if (users && q.target_rate > 0)
    throw ConfigError(fmt::format("{}: give target_rate (requests/s) or users (concurrent), not both", capacity_what));
  if (const auto think = f.number("think")) {
    if (!users) throw ConfigError(fmt::format("{}: think is the users' wait between requests; it needs users = N", capacity_what));
    if (!(*think >= 0)) throw ConfigError(fmt::format("{}: think must be >= 0 seconds", capacity_what));
    q.traffic.arrivals.think = *think;
  }

  const CapacityResult r = users ? plan_users(q, *users) : plan_capacity(q);

  lua_createtable(L, 0, 22);
  set_string(L, "mode", users ? "users" : "rate");
  set_string(L, "model", q.model.name);
  set_string(L, "hardware", q.hardware.name);
  set_string(L, "step", q.stack.empty() ? "baseline" : q.stack.back().name);
  if (users) {
    set_number(L, "users", static_cast<double>(*users));
    set_number(L, "users_per_replica", static_cast<double>(r.users_per_replica));
  } else {
    set_number(L, "max_rate", r.max_rate);
    set_number(L, "saturation_rate", r.saturation_rate);
    if (q.target_rate > 0) set_number(L, "target_rate", q.target_rate);
  }
  set_number(L, "replicas", static_cast<double>(r.replicas));
  set_number(L, "gpus_per_replica", r.gpus_per_replica);
  set_number(L, "gpus", static_cast<double>(r.gpus));
  set_number(L, "tokens_per_s", r.tokens_per_second_at_max);
  set_number(L, "requests_per_s", r.requests_per_second_at_max);
  set_number(L, "price_per_hour", r.price_per_hour);
  set_number(L, "cost_per_million_tokens", r.cost_per_million_tokens);
  set_string(L, "note", r.note);
  lua_createtable(L, 0, 4);
  set_number(L, "ttft", q.traffic.slo.ttft);
  set_number(L, "tpot", q.traffic.slo.tpot);
  set_number(L, "e2e", q.traffic.slo.e2e);
  set_number(L, "attainment", q.attainment);
  lua_setfield(L, -2, "slo");
  lua_createtable(L, static_cast<int>(r.tried.size()), 0);
  for (std::size_t i = 0; i < r.tried.size(); ++i) {
    push_point(L, r.tried[i]);
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  lua_setfield(L, -2, "tried");
  push_rule(L, r.rule_of_thumb);
  if (users) set_number(L, "gpus", static_cast<double>(r.rule_of_thumb.gpus_for_users(*users)));
  else if (q.target_rate > 0) set_number(L, "gpus", static_cast<double>(r.rule_of_thumb.gpus_for_rate(q.target_rate)));
  lua_setfield(L, -2, "rule_of_thumb");
  return 1;
}

}  // namespace perfsim::dsl
