// Registration of the script API, and the small constructors: model(), hardware(),
// prefill{}, decode{}, train{}, plus the perfsim.* catalog and helper functions.
#include "dsl/lua_api.hpp"

#include <fmt/format.h>

#include "core/cost/host_cpu.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/text.hpp"
#include "core/version.hpp"
#include "dsl/lua_capacity.hpp"
#include "dsl/lua_catalog.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_profile.hpp"
#include "dsl/lua_serve.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace {

// model("llama-3-8b"), model("llama-3-8b", {layers = 2}), model{layers = ..., ...}
int api_model(lua_State* L) {
  ModelConfig m;
  if (lua_type(L, 1) == LUA_TSTRING)
    m = lookup_model(L, lua_tostring(L, 1));
  else if (lua_istable(L, 1))
    m = to_model(L, 1, "model{}");
  else
    throw ConfigError(fmt::format(
        "model() expects a zoo name such as \"llama-3-8b\" or a table of dimensions (got {})",
        describe_value(L, 1)));
  if (!lua_isnoneornil(L, 2)) {
    // Without GQA, kv_heads follows a new `heads` unless it is given too (gpt2 with 16 heads
    // keeps 16 key/value heads, not the 12 of the original).
    const bool multi_head = m.kv_heads_or_heads() == m.heads;
    read_model_fields(L, 2, m, "model() overrides");
    lua_getfield(L, 2, "kv_heads");
    if (multi_head && lua_isnil(L, -1)) m.kv_heads = m.heads;
    lua_pop(L, 1);
  }
  validate(m);
  push_model(L, m);
  return 1;
}

// hardware("H100-SXM"), hardware("H100-SXM", {memory_bytes = 40e9}), hardware{...}
int api_hardware(lua_State* L) {
  Hardware hw;
  if (lua_type(L, 1) == LUA_TSTRING)
    hw = lookup_hardware(L, lua_tostring(L, 1));
  else if (lua_istable(L, 1))
    hw = to_hardware(L, 1, "hardware{}");
  else
    throw ConfigError(fmt::format(
        "hardware() expects a catalog name such as \"H100-SXM\" or a table (got {})",
        describe_value(L, 1)));
  if (!lua_isnoneornil(L, 2)) read_hardware_fields(L, 2, hw, "hardware() overrides");
  push_hardware(L, hw);
  return 1;
}

template <Phase P>
int api_workload(lua_State* L) {
  const std::string what = fmt::format("{}{{}}", name_of(P));
  Workload w;
  if (lua_isnoneornil(L, 1)) {
    w.phase = P;
  } else {
    w = to_workload(L, 1, P, what);
  }
  push_workload(L, w);
  return 1;
}

// perfsim._check_step{name = ..., passes = {...}}: validates and normalizes a step (prelude).
int api_check_step(lua_State* L) {
  StackStep s = to_step(L, 1, "step()");
  if (s.where.empty()) s.where = script_where(L);  // the scenario's step(...) line
  push_step(L, s);
  return 1;
}

// perfsim._raise(message): a ConfigError at the script's line, for stdlib Lua code.
int api_raise(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  throw ConfigError(msg != nullptr ? msg : "error");
}

// perfsim._did_you_mean(name, {candidates}) -> " (did you mean 'x'?)" or "".
int api_did_you_mean(lua_State* L) {
  const char* name = lua_tostring(L, 1);
  std::vector<std::string> candidates;
  if (lua_istable(L, 2))
    for (int i = 1; i <= array_length(L, 2); ++i) {
      lua_rawgeti(L, 2, i);
      if (lua_type(L, -1) == LUA_TSTRING) candidates.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  const std::string hint = did_you_mean(name != nullptr ? name : "", candidates);
  lua_pushlstring(L, hint.data(), hint.size());
  return 1;
}

void push_string_list(lua_State* L, const std::vector<std::string>& items) {
  lua_createtable(L, static_cast<int>(items.size()), 0);
  for (std::size_t i = 0; i < items.size(); ++i) {
    lua_pushlstring(L, items[i].data(), items[i].size());
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
}

int api_hardware_names(lua_State* L) {
  push_string_list(L, catalog_names(L, "hardware"));
  return 1;
}

int api_model_names(lua_State* L) {
  push_string_list(L, catalog_names(L, "models"));
  return 1;
}

// perfsim.optimizations() -> {{name=, summary=, needs_value=, workload_pass=}, ...}
int api_optimizations(lua_State* L) {
  const auto& all = optimizations();
  lua_createtable(L, static_cast<int>(all.size()), 0);
  for (std::size_t i = 0; i < all.size(); ++i) {
    lua_createtable(L, 0, 4);
    lua_pushstring(L, all[i].name.c_str());
    lua_setfield(L, -2, "name");
    lua_pushstring(L, all[i].summary.c_str());
    lua_setfield(L, -2, "summary");
    lua_pushboolean(L, all[i].value == PassValue::required ? 1 : 0);
    lua_setfield(L, -2, "needs_value");
    lua_pushboolean(L, all[i].kind == OptimizationKind::workload ? 1 : 0);
    lua_setfield(L, -2, "workload_pass");
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  return 1;
}

// perfsim.collective_time{collective = "all_reduce", gpus = 8, bytes = 64e6, hardware = h}:
// seconds for one collective as the cost model prices it (core/cost/roofline.hpp collective_time: the
// profile's calibrated fit for that collective and group, else alpha-beta over its fastest
// link), without the op's launch.
int api_collective_time(lua_State* L) {
  const std::string what = "perfsim.collective_time{}";
  if (!lua_istable(L, 1))
    throw ConfigError(fmt::format("{} expects a table {{collective = \"all_reduce\", gpus = 8, bytes = 64e6, "
                                  "hardware = \"H100-SXM\"}} (got {})",
                                  what, describe_value(L, 1)));
  const FieldReader f(L, 1, what, {"collective", "gpus", "bytes", "hardware"});
  const std::optional<std::string> name = f.string("collective");
  const std::optional<int64_t> gpus = f.integer("gpus");
  const std::optional<double> bytes = f.number("bytes");
  if (!name || !gpus || !bytes || !f.has("hardware"))
    throw ConfigError(fmt::format("{} needs collective, gpus, bytes and hardware", what));
  const Collective c = to_collective(*name, what);
  if (*gpus < 1) throw ConfigError(fmt::format("{}: gpus must be >= 1 (got {})", what, *gpus));
  if (!(*bytes >= 0)) throw ConfigError(fmt::format("{}: bytes must be >= 0 (got {})", what, format_number(*bytes)));
  f.push("hardware");
  const Hardware hw = lua_type(L, -1) == LUA_TSTRING ? lookup_hardware(L, lua_tostring(L, -1))
                                                      : to_hardware(L, -1, what + " hardware");
  lua_pop(L, 1);
  const std::optional<double> t = collective_time(c, static_cast<int>(*gpus), *bytes, hw);
  if (!t)
    throw ConfigError(fmt::format("{}: hardware '{}' has no link for {} over {} GPUs and no calibrated fit of it "
                                  "(nvlink or pcie within a node of gpus_per_node GPUs, infiniband across nodes)",
                                  what, hw.name, *name, *gpus));
  lua_pushnumber(L, *t);
  return 1;
}

// perfsim.host_cpu(): the profile of this machine (stdlib/hardware.lua lists it as host-cpu).
int api_host_cpu(lua_State* L) {
  // /proc does not change while we run; read it once per process.
  static const Hardware host = detect_host_cpu();
  push_hardware(L, host);
  return 1;
}

void set_function(lua_State* L, const char* name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  lua_setfield(L, -2, name);
}

}  // namespace

void install_api(lua_State* L) {
  const std::pair<const char*, lua_CFunction> globals[] = {
      {"scenario", guarded<api_scenario>},
      {"options", guarded<api_options>},
      {"model", guarded<api_model>},
      {"hardware", guarded<api_hardware>},
      {"profile", guarded<api_profile>},
      {"prefill", guarded<api_workload<Phase::prefill>>},
      {"decode", guarded<api_workload<Phase::decode>>},
      {"train", guarded<api_workload<Phase::train>>},
      {"serve", guarded<api_serve>},
  };
  for (const auto& [name, f] : globals) {
    lua_pushcfunction(L, f);
    lua_setglobal(L, name);
  }
  lua_newtable(L);
  set_function(L, "predict", guarded<api_predict>);
  set_function(L, "measure", guarded<api_measure>);
  set_function(L, "search", guarded<api_search>);
  set_function(L, "capacity", guarded<api_capacity>);
  set_function(L, "optimizations", guarded<api_optimizations>);
  set_function(L, "hardware_names", guarded<api_hardware_names>);
  set_function(L, "model_names", guarded<api_model_names>);
  set_function(L, "host_cpu", guarded<api_host_cpu>);
  set_function(L, "collective_time", guarded<api_collective_time>);
  set_function(L, "_check_step", guarded<api_check_step>);
  set_function(L, "_raise", guarded<api_raise>);
  set_function(L, "_did_you_mean", guarded<api_did_you_mean>);
  lua_pushstring(L, perfsim_version);
  lua_setfield(L, -2, "version");
  lua_setglobal(L, "perfsim");
}

}  // namespace perfsim::dsl
