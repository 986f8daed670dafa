// scenario{...}: reads model, hardware, workload, stacks, execute and sweep; checks that the
// configuration can describe a real run; expands the sweep into points.
#include "dsl/lua_scenario.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/errors.hpp"
#include "core/config/dtype.hpp"
#include "core/text.hpp"
#include "dsl/lua_api.hpp"
#include "dsl/lua_catalog.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_serve.hpp"
#include "dsl/lua_state.hpp"
#include "dsl/lua_parallel.hpp"
#include "dsl/sweep.hpp"
#include "core/run/published_metrics.hpp"

namespace perfsim::dsl {

namespace {

constexpr const char* built_key = "perfsim.built_scenarios";

ModelConfig read_model(lua_State* L, int index) {
  ModelConfig m;
  if (lua_type(L, index) == LUA_TSTRING)
    m = lookup_model(L, lua_tostring(L, index));
  else if (lua_istable(L, index))
    m = to_model(L, index, "model");
  else
    throw ConfigError(fmt::format(
        "scenario needs model = model(\"llama-3-8b\") (a zoo name or a table of dimensions; got {})",
        describe_value(L, index)));
  validate(m);
  return m;
}

Hardware read_one_hardware(lua_State* L, int index, const std::string& what) {
  if (lua_type(L, index) == LUA_TSTRING) return lookup_hardware(L, lua_tostring(L, index));
  if (lua_istable(L, index)) return to_hardware(L, index, what);
  throw ConfigError(fmt::format("{} must be a catalog name such as \"H100-SXM\" or a hardware table (got {})",
                                what, describe_value(L, index)));
}

std::vector<Hardware> read_hardware_list(lua_State* L, int index) {
  if (lua_isnil(L, index))
    throw ConfigError(
        "scenario needs hardware = \"H100-SXM\" or a list such as {\"H100-SXM\", \"A100-80GB\"} "
        "(see `perfsim list hardware`)");
  if (lua_istable(L, index) && array_length(L, index) > 0) {
    std::vector<Hardware> out;
    for (int i = 1; i <= array_length(L, index); ++i) {
      lua_rawgeti(L, index, i);
      out.push_back(read_one_hardware(L, lua_gettop(L), fmt::format("hardware[{}]", i)));
      lua_pop(L, 1);
    }
    return out;
  }
  return {read_one_hardware(L, index, "hardware")};
}

std::vector<StackStep> read_stacks(lua_State* L, int index) {
  std::vector<StackStep> out;
  if (lua_isnil(L, index)) return out;
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format(
        "stacks must be a list of steps such as {{step(\"baseline\", \"bf16\"), ...}} (got {})",
        describe_value(L, index)));
  const int n = array_length(L, index);
  if (n == 0 && !string_keys(L, index).empty())
    throw ConfigError("stacks must be a list of steps, not a table of named fields");
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, index, i);
    out.push_back(to_step(L, lua_gettop(L), fmt::format("stacks[{}]", i)));
    lua_pop(L, 1);
  }
  return out;
}

// Reads sweep = {batch = {1, 8}, hardware = {...}}; resolves model/hardware names into `named`.
std::vector<SweepAxis> read_sweep(lua_State* L, int index, Phase phase, bool serve, SweepCatalog& named) {
  std::vector<SweepAxis> axes;
  if (lua_isnil(L, index)) return axes;
  if (lua_istable(L, index)) {
    if (array_length(L, index) > 0)
      throw ConfigError("sweep takes named lists, such as sweep = {batch = {1, 8, 32}}");
    for (const std::string& key : string_keys(L, index))
      if (std::find(sweep_keys().begin(), sweep_keys().end(), key) == sweep_keys().end())
        throw ConfigError(fmt::format("unknown sweep key '{}'{}; sweep keys: {}", key,
                                      did_you_mean(key, sweep_keys()), fmt::join(sweep_keys(), ", ")));
  }
  const FieldReader r(L, index, "sweep", sweep_keys());
  for (const std::string& key : sweep_keys()) {
    if (r.push(key.c_str()) == LUA_TNIL) {
      lua_pop(L, 1);
      continue;
    }
    if (const std::string problem = sweep_key_problem(key, phase, serve); !problem.empty())
      throw ConfigError(problem);
    const int list = lua_gettop(L);
    // A single value is a one-point axis.
    if (!lua_istable(L, list)) {
      lua_createtable(L, 1, 0);
      lua_pushvalue(L, list);
      lua_rawseti(L, -2, 1);
      lua_replace(L, list);
    }
    SweepAxis axis{key, {}};
    const int n = array_length(L, list);
    if (n == 0) throw ConfigError(fmt::format("sweep.{} must be a non-empty list of values", key));
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L, list, i);
      const std::string what = fmt::format("sweep.{}[{}]", key, i);
      if (is_integer_sweep_key(key)) {
        axis.values.push_back(fmt::format("{}", to_integer(L, -1, what)));
      } else if (key == "rate") {
        if (lua_type(L, -1) != LUA_TNUMBER || !(lua_tonumber(L, -1) > 0))
          throw ConfigError(fmt::format("{} must be a rate > 0 requests/s (got {})", what, describe_value(L, -1)));
        axis.values.push_back(format_number(lua_tonumber(L, -1)));
      } else if (key == "kv_cache") {
        if (lua_type(L, -1) != LUA_TBOOLEAN)
          throw ConfigError(fmt::format("{} must be true or false (got {})", what, describe_value(L, -1)));
        axis.values.push_back(lua_toboolean(L, -1) ? "true" : "false");
      } else {
        if (lua_type(L, -1) != LUA_TSTRING)
          throw ConfigError(fmt::format("{} must be a {} name (got {})", what, key, describe_value(L, -1)));
        const std::string name = lua_tostring(L, -1);
        if (key == "model") {
          ModelConfig m = lookup_model(L, name);
          validate(m);
          axis.values.push_back(m.name);
          named.models[m.name] = m;
        } else {
          Hardware hw = lookup_hardware(L, name);
          axis.values.push_back(hw.name);
          named.hardware[hw.name] = hw;
        }
      }
      lua_pop(L, 1);
    }
    axes.push_back(std::move(axis));
    lua_pop(L, 1);
  }
  return axes;
}

bool is_serve_table(lua_State* L, int index) {
  if (!lua_istable(L, index)) return false;
  lua_getfield(L, index, "phase");
  const bool serve = lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "serve";
  lua_pop(L, 1);
  return serve;
}

// The decode step of one sequence at the traffic's mean lengths: what explain prices for a
// serving scenario.
Workload serve_decode_step(const ServeSpec& s, const ModelConfig& m) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 1;
  const int64_t half = std::max<int64_t>(1, m.max_seq / 2);
  w.prompt = std::clamp<int64_t>(std::llround(s.prompt.mean), 1, half);
  w.new_tokens = std::clamp<int64_t>(std::llround(s.output.mean), 1, half);
  return w;
}

// published = {source = ..., citation = ..., url = ..., metric = ..., value = ..., note = ...}
PublishedFigure read_published(lua_State* L, int index) {
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format("published must be a table {{source = ..., citation = ..., metric = ..., "
                                  "value = ...}}, got {}",
                                  describe_value(L, index)));
  const FieldReader f(L, index, "published", {"source", "citation", "url", "metric", "value", "note"});
  PublishedFigure p;
  for (const char* key : {"source", "citation", "metric"}) {
    const std::optional<std::string> v = f.string(key);
    if (!v || v->empty()) throw ConfigError(fmt::format("published.{} is missing: every published case names it", key));
  }
  p.source = *f.string("source");
  p.citation = *f.string("citation");
  p.metric = *f.string("metric");
  p.url = f.string("url").value_or("");
  p.note = f.string("note").value_or("");
  if (!is_published_metric(p.metric))
    throw ConfigError(fmt::format("published.metric '{}' is not one of: {}", p.metric, published_metric_names()));
  const std::optional<double> value = f.number("value");
  if (!value || !std::isfinite(*value) || *value <= 0)
    throw ConfigError("published.value must be the published figure, a number > 0 in the metric's unit");
  p.value = *value;
  return p;
}

std::string default_name(const std::string& file) {
  if (file.empty()) return "scenario";
  return std::filesystem::path(file).stem().string();
}

}  // namespace

const std::vector<std::string>& scenario_fields() {
  // host_data = true: the inputs start in host memory and every step uploads them
  // (Workload::host_data); the pinned_memory and prefetch passes act on those uploads.
  static const std::vector<std::string> f = {"name",   "description", "model",   "hardware",
                                             "workload", "stacks",    "execute", "sweep",
                                             "host_data", "parallel", "published"};
  return f;
}

BuiltScenario build_scenario(lua_State* L, int index, const std::string& what,
                             const std::vector<std::string>& extra_fields) {
  const StackRestore restore(L);
  index = abs_index(L, index);
  std::vector<std::string> fields = scenario_fields();
  fields.insert(fields.end(), extra_fields.begin(), extra_fields.end());
  const FieldReader r(L, index, what, fields);

  BuiltScenario b;
  Scenario& s = b.scenario;
  s.file = context(L).file;
  s.name = r.string("name").value_or(default_name(s.file));
  r.read("description", s.description);

  r.push("model");
  if (lua_isnil(L, -1))
    throw ConfigError(fmt::format("{} needs model = model(\"llama-3-8b\") (a zoo name or a table of "
                                  "dimensions; see `perfsim list models`)",
                                  what));
  s.model = read_model(L, lua_gettop(L));
  r.push("hardware");
  s.hardware = read_hardware_list(L, lua_gettop(L));
  r.push("workload");
  if (lua_isnil(L, -1))
    throw ConfigError(fmt::format(
        "{} needs workload = prefill{{...}}, decode{{...}} or train{{...}}", what));
  if (is_serve_table(L, -1)) {
    if (s.model.image_model())
      throw ConfigError(fmt::format("{}: model '{}' is an image classifier: serve{{}} runs language models (use "
                                    "train{{}} or prefill{{}} for a batch of images)",
                                    what, s.model.name));
    s.serve = to_serve(L, -1, "serve{}", context(L).dir);
    s.workload = serve_decode_step(*s.serve, s.model);
  } else {
    s.workload = to_workload(L, -1, "workload");
    s.workload.images = s.model.image_model();  // an image model's batch is of images
  }
  r.read("host_data", s.workload.host_data);
  r.push("parallel");
  s.parallel = read_parallel(L, lua_gettop(L));
  r.push("stacks");
  s.stacks = read_stacks(L, lua_gettop(L));
  if (r.push("execute") != LUA_TNIL) {
    s.execute = to_execute(L, lua_gettop(L));
    bool layers = false;  // execute = false is a boolean
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "layers");
      layers = !lua_isnil(L, -1);
      lua_pop(L, 1);
    }
    if (layers && s.model.image_model())
      throw ConfigError(fmt::format("{}: execute.layers samples transformer layers; model '{}' runs every distinct "
                                    "block (a stage's repeated blocks are counted): leave it out",
                                    what, s.model.name));
  }
  if (r.push("published") != LUA_TNIL) s.published = read_published(L, lua_gettop(L));
  SweepCatalog named;
  r.push("sweep");
  s.sweep = read_sweep(L, lua_gettop(L), s.workload.phase, s.serve.has_value(), named);

  b.points = expand_sweep(s, named);
  for (const ScenarioPoint& p : b.points) {
    try {
      validate(p.scenario);
    } catch (const ConfigError& e) {
      if (p.values.empty()) throw;
      throw ConfigError(fmt::format("sweep point {}: {}", sweep_point_label(p.values), e.what()));
    }
  }
  return b;
}

std::optional<std::size_t> built_scenario_id(lua_State* L, int index) {
  index = abs_index(L, index);
  lua_getfield(L, LUA_REGISTRYINDEX, built_key);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return std::nullopt;
  }
  lua_pushvalue(L, index);
  lua_rawget(L, -2);
  std::optional<std::size_t> id;
  if (lua_type(L, -1) == LUA_TNUMBER) id = static_cast<std::size_t>(lua_tonumber(L, -1));
  lua_pop(L, 2);
  return id;
}

Scenario scenario_field(lua_State* L, const FieldReader& f, const char* what) {
  if (f.push("scenario") != LUA_TTABLE) {
    const std::string got = describe_value(L, -1);
    lua_pop(L, 1);
    throw ConfigError(fmt::format("{} needs scenario = a table returned by scenario{{...}} (got {})", what, got));
  }
  const int index = lua_gettop(L);
  BuiltScenario b;
  if (const auto id = built_scenario_id(L, index))
    b = context(L).scenarios.at(*id);
  else
    b = build_scenario(L, index, fmt::format("{} scenario", what));
  lua_pop(L, 1);
  return b.points.empty() ? b.scenario : b.points.front().scenario;
}

int api_scenario(lua_State* L) {
  ScriptContext& ctx = context(L);
  BuiltScenario b = build_scenario(L, 1, "scenario{}");
  ctx.scenarios.push_back(std::move(b));
  // Remember the table so that returning it selects this scenario.
  lua_getfield(L, LUA_REGISTRYINDEX, built_key);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_newtable(L);
    lua_pushstring(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, built_key);
  }
  lua_pushvalue(L, 1);
  lua_pushnumber(L, static_cast<double>(ctx.scenarios.size() - 1));
  lua_rawset(L, -3);
  lua_pop(L, 1);
  lua_pushvalue(L, 1);
  return 1;
}

}  // namespace perfsim::dsl
