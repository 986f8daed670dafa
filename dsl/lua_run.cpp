// perfsim.predict{...} and perfsim.measure{...}: run a scenario (every sweep point, every stack
// step) from inside a script and return one Lua row per step.
#include <fmt/format.h>

#include <memory>

#include "backends/registry.hpp"
#include "core/errors.hpp"
#include "core/run/runner.hpp"
#include "dsl/lua_api.hpp"
#include "dsl/lua_catalog.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_parallel.hpp"
#include "dsl/lua_scenario.hpp"
#include "dsl/lua_state.hpp"
#include "dsl/sweep.hpp"

namespace perfsim::dsl {

namespace {


void push_by_class(lua_State* L, const std::map<OpClass, double>& by_class) {
  lua_createtable(L, 0, static_cast<int>(by_class.size()));
  for (const auto& [c, t] : by_class) set_number(L, std::string(name_of(c)).c_str(), t);
}

// The sweep values of a point with their natural Lua types.
void push_sweep_values(lua_State* L, const std::map<std::string, std::string>& values) {
  lua_createtable(L, 0, static_cast<int>(values.size()));
  for (const auto& [k, v] : values) {
    if (is_integer_sweep_key(k) || k == "rate")
      lua_pushnumber(L, std::stod(v));
    else if (k == "kv_cache")
      lua_pushboolean(L, v == "true" ? 1 : 0);
    else
      lua_pushlstring(L, v.data(), v.size());
    lua_setfield(L, -2, k.c_str());
  }
}

// One row per step; `base` is the first step of the same point (for speedups).
void push_row(lua_State* L, const StepResult& r, const StepResult& base,
              const std::map<std::string, std::string>& sweep) {
  const Prediction& p = r.predicted;
  const double tokens = step_tokens(r);
  lua_createtable(L, 0, 20);
  set_string(L, "step", r.step);
  set_string(L, "hardware", p.hardware);
  set_number(L, "time", p.step_time);
  set_number(L, "tokens_per_s", p.step_time > 0 ? tokens / p.step_time : 0.0);
  set_number(L, "speedup", speedup(base.predicted.step_time, step_tokens(base), p.step_time, tokens));
  set_number(L, "memory", p.memory.peak);
  set_number(L, "memory_executed", p.memory_executed.peak);
  set_bool(L, "fits", p.fits);
  set_number(L, "flops", p.flops);
  set_number(L, "model_flops", p.model_flops);
  set_number(L, "mfu", p.mfu);
  // The layout: a single GPU unless the step runs on several.
  push_parallel(L, r.layout ? r.layout->layout : ParallelSpec{});
  lua_setfield(L, -2, "parallel");
  set_number(L, "gpus", r.layout ? r.layout->gpus : 1);
  if (r.layout) {
    const LayoutPrediction& lp = *r.layout;
    set_number(L, "tokens_per_s_per_gpu", lp.tokens_per_second_per_gpu);
    set_number(L, "hfu", lp.hfu);
    set_number(L, "bubble", lp.bubble_fraction);
    set_number(L, "communication", lp.communication_time);
    set_number(L, "exposed_communication", lp.exposed_communication);
    set_number(L, "memory_least_rank", lp.memory_min);
  } else {
    set_number(L, "tokens_per_s_per_gpu", p.step_time > 0 ? tokens / p.step_time : 0.0);
    set_number(L, "hfu", p.hfu);
    set_number(L, "bubble", 0);
    set_number(L, "communication", p.communication_time);
    set_number(L, "exposed_communication", p.exposed_communication);
    set_number(L, "memory_least_rank", p.memory.peak);
  }
  push_by_class(L, p.time_by_class);
  lua_setfield(L, -2, "by_class");
  if (r.measured) {
    const Measurement& m = *r.measured;
    set_number(L, "measured_time", m.step_time);
    set_number(L, "measured_tokens_per_s", m.step_time > 0 ? tokens / m.step_time : 0.0);
    set_number(L, "measured_memory", m.peak_bytes);
    set_number(L, "error", relative_error(p.step_time, m.step_time));
    // The same model FLOPs over the measured step (COST_MODEL.md §4).
    if (m.step_time > 0) set_number(L, "measured_mfu", p.mfu * p.step_time / m.step_time);
    push_by_class(L, m.time_by_class);
    lua_setfield(L, -2, "measured_by_class");
  } else {
    set_string(L, "not_executed", r.not_executed);
  }
  lua_createtable(L, static_cast<int>(r.what_if.size()), 0);
  for (std::size_t i = 0; i < r.what_if.size(); ++i) {
    const Prediction& w = r.what_if[i];
    lua_createtable(L, 0, 6);
    set_string(L, "hardware", w.hardware);
    set_number(L, "time", w.step_time);
    set_number(L, "tokens_per_s", w.step_time > 0 ? tokens / w.step_time : 0.0);
    set_number(L, "memory", w.memory.peak);
    set_bool(L, "fits", w.fits);
    set_number(L, "mfu", w.mfu);
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  lua_setfield(L, -2, "what_if");
  push_sweep_values(L, sweep);
  lua_setfield(L, -2, "sweep");
}

void push_latency(lua_State* L, const char* key, const LatencyStats& l) {
  lua_createtable(L, 0, 5);
  set_number(L, "mean", l.mean);
  set_number(L, "p50", l.median);
  set_number(L, "p90", l.p90);
  set_number(L, "p99", l.p99);
  set_number(L, "max", l.max);
  lua_setfield(L, -2, key);
}

void push_serve_metrics(lua_State* L, const ServeMetrics& m) {
  set_number(L, "requests_per_s", m.request_throughput);
  set_number(L, "output_tokens_per_s", m.output_throughput);
  set_number(L, "tokens_per_s", m.total_token_throughput);
  set_number(L, "goodput", m.goodput);
  set_number(L, "slo_attainment", m.slo_attainment);
  set_number(L, "completed", static_cast<double>(m.completed));
  set_number(L, "rejected", static_cast<double>(m.rejected));
  set_number(L, "preemptions", static_cast<double>(m.preemptions));
  set_number(L, "duration", m.duration);
  set_number(L, "mean_batch", m.mean_batch);
  set_number(L, "kv_utilization", m.kv_utilization_mean);
  set_number(L, "prefix_hit_rate", m.prefix_hit_rate);
  push_latency(L, "ttft", m.ttft);
  push_latency(L, "tpot", m.tpot);
  push_latency(L, "itl", m.itl);
  push_latency(L, "e2e", m.e2e);
  push_latency(L, "queue", m.queue);
}

// One row per serving step: vLLM's figures (seconds), the engine's, and the other hardware.
void push_serve_row(lua_State* L, const ServeStepResult& r, const ServeStepResult& base,
                    const std::map<std::string, std::string>& sweep) {
  const ServeMetrics& m = r.predicted.metrics;
  lua_createtable(L, 0, 24);
  set_string(L, "step", r.step);
  set_string(L, "hardware", r.hardware);
  set_string(L, "scheduler", r.scheduler);
  push_serve_metrics(L, m);
  const double b = base.predicted.metrics.output_throughput;
  set_number(L, "speedup", b > 0 ? m.output_throughput / b : 0.0);
  lua_createtable(L, static_cast<int>(r.what_if.size()), 0);
  for (std::size_t i = 0; i < r.what_if.size(); ++i) {
    lua_createtable(L, 0, 20);
    set_string(L, "hardware", r.what_if[i].hardware);
    if (r.what_if[i].error.empty()) push_serve_metrics(L, r.what_if[i].metrics);
    else set_string(L, "error", r.what_if[i].error);
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  lua_setfield(L, -2, "what_if");
  push_sweep_values(L, sweep);
  lua_setfield(L, -2, "sweep");
}

int run_rows(lua_State* L, const BuiltScenario& b, Backend* backend, const Hardware* device_hw) {
  lua_newtable(L);
  int n = 0;
  for (const ScenarioPoint& point : b.points) {
    // A script prices points in loops: perfsim.search answers "what fits" when it asks.
    RunnerHooks hooks;
    hooks.find_layouts_that_fit = false;
    const RunResult result = run_scenario(point.scenario, backend, device_hw, hooks);
    for (const StepResult& step : result.steps) {
      push_row(L, step, result.steps.front(), point.values);
      lua_rawseti(L, -2, ++n);
    }
    for (const ServeStepResult& step : result.serve) {
      push_serve_row(L, step, result.serve.front(), point.values);
      lua_rawseti(L, -2, ++n);
    }
  }
  return 1;
}

}  // namespace

int api_predict(lua_State* L) {
  // Listing options must not run anything.
  if (context(L).settings.options_only) throw StopScript{};
  const BuiltScenario b = build_scenario(L, 1, "perfsim.predict{}");
  return run_rows(L, b, nullptr, nullptr);
}

int api_measure(lua_State* L) {
  const ScriptContext& ctx = context(L);
  if (ctx.settings.options_only) throw StopScript{};
  if (!ctx.settings.measure_and_search_allowed)
    throw ConfigError("perfsim.measure{}: measuring is turned off for this load (predict instead)");
  const BuiltScenario b = build_scenario(L, 1, "perfsim.measure{}", {"backend"});
  std::string backend_name = ctx.settings.default_backend;
  lua_getfield(L, 1, "backend");
  if (lua_type(L, -1) == LUA_TSTRING)
    backend_name = lua_tostring(L, -1);
  else if (!lua_isnil(L, -1))
    throw ConfigError(fmt::format("perfsim.measure{{}}: backend must be a name such as \"cpu\" (got {})",
                                  describe_value(L, -1)));
  lua_pop(L, 1);
  const std::unique_ptr<Backend> backend = make_backend(backend_name);
  // Predictions paired with measurements use the profile of the device that ran them.
  std::optional<Hardware> device_hw;
  try {
    device_hw = lookup_hardware(L, backend->device().catalog_name);
  } catch (const ConfigError&) {
    device_hw.reset();  // not in the catalog: the runner falls back to the scenario's hardware
  }
  return run_rows(L, b, backend.get(), device_hw ? &*device_hw : nullptr);
}

}  // namespace perfsim::dsl
