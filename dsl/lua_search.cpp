// perfsim.search{scenario = s, gpus = 512, top = 10}: the layout search of
// core/parallel/search.hpp from a script. Returns the top layouts as a list of rows, with the
// counts of enumerated, priced and pruned layouts in its `counts` field.
#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"
#include "core/parallel/search.hpp"
#include "dsl/lua_api.hpp"
#include "dsl/lua_catalog.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_parallel.hpp"
#include "dsl/lua_scenario.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace {

constexpr const char* search_what = "perfsim.search{}";

// A list of whole numbers ({1, 2, 4} or a single number) for a dimension of the space.
template <typename T>
std::vector<T> read_list(lua_State* L, const FieldReader& f, const char* key) {
  std::vector<T> out;
  const int type = f.push(key);
  const std::string what = fmt::format("{} {}", search_what, key);
  if (type == LUA_TNUMBER) {
    out.push_back(static_cast<T>(to_integer(L, -1, what)));
  } else if (type == LUA_TTABLE) {
    const int n = array_length(L, -1);
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L, -1, i);
      out.push_back(static_cast<T>(to_integer(L, -1, what)));
      lua_pop(L, 1);
    }
    if (out.empty()) throw ConfigError(fmt::format("{} is an empty list; give at least one value", what));
  } else if (type != LUA_TNIL) {
    const std::string got = describe_value(L, -1);
    lua_pop(L, 1);
    throw ConfigError(fmt::format("{} must be a whole number or a list of them such as {{1, 2, 4}} (got {})", what,
                                  got));
  }
  lua_pop(L, 1);
  return out;
}


void push_row(lua_State* L, const SearchCandidate& c, std::size_t rank) {
  lua_createtable(L, 0, 18);
  set_number(L, "rank", static_cast<double>(rank));
  push_parallel(L, c.layout);
  lua_setfield(L, -2, "layout");
  set_string(L, "describe", describe(c.layout));
  set_number(L, "micro_batch", static_cast<double>(c.micro_batch));
  set_number(L, "grad_accum", static_cast<double>(c.grad_accum));
  set_bool(L, "recompute", c.recompute);
  set_number(L, "tokens_per_s", c.tokens_per_second);
  set_number(L, "tokens_per_s_per_gpu", c.tokens_per_second_per_gpu);
  set_number(L, "mfu", c.mfu);
  set_number(L, "step_time", c.step_time);
  set_number(L, "bubble", c.bubble_fraction);
  set_number(L, "exposed_communication", c.exposed_communication);
  set_number(L, "memory", c.memory_peak);
  set_number(L, "memory_stage", c.worst_rank);
  set_bool(L, "fits", c.fits);
  set_string(L, "limiter", name_of(c.limiter));
}

void push_counts(lua_State* L, const SearchResult& r) {
  lua_createtable(L, 0, 4);
  set_number(L, "enumerated", static_cast<double>(r.enumerated));
  set_number(L, "evaluated", static_cast<double>(r.evaluated));
  set_number(L, "fitting", static_cast<double>(r.fitting));
  lua_createtable(L, 0, prune_reason_count);
  for (int i = 0; i < prune_reason_count; ++i)
    set_number(L, name_of(static_cast<PruneReason>(i)), static_cast<double>(r.pruned[i]));
  lua_setfield(L, -2, "pruned");
}

}  // namespace

int api_search(lua_State* L) {
  if (context(L).settings.options_only) throw StopScript{};
  if (!context(L).settings.measure_and_search_allowed)
    throw ConfigError("perfsim.search{}: searching is turned off for this load");
  if (!lua_istable(L, 1))
    throw ConfigError(fmt::format("{} expects a table {{scenario = s, gpus = 512, top = 10}} (got {})", search_what,
                                  describe_value(L, 1)));
  const FieldReader f(L, 1, search_what,
                      {"scenario", "gpus", "top", "hardware", "global_batch", "micro_batch", "tp", "pp", "zero",
                       "interleave", "ep", "recompute", "cp", "uneven_pp", "threads"});
  const Scenario s = scenario_field(L, f, search_what);

  std::vector<StackStep> stack = s.stacks;
  if (stack.empty()) stack.push_back(StackStep{"baseline", {}, ""});
  const std::size_t step = stack.size() - 1;
  const ParallelSpec layout = step_parallel(s.parallel, stack, step);

  SearchSpace space;
  const std::optional<int64_t> gpus = f.integer("gpus");
  if (!gpus && layout.gpus() == 1)
    throw ConfigError(fmt::format("{} needs gpus = N: the scenario lays its step out on a single GPU", search_what));
  space.gpus = static_cast<int>(gpus.value_or(layout.gpus()));
  if (space.gpus < 1) throw ConfigError(fmt::format("{}: gpus must be >= 1 (got {})", search_what, space.gpus));
  const int64_t top = f.integer("top").value_or(10);
  if (top < 1) throw ConfigError(fmt::format("{}: top must be >= 1 (got {})", search_what, top));
  space.global_batch = f.integer("global_batch").value_or(0);
  space.micro_batches = read_list<int64_t>(L, f, "micro_batch");
  space.tp = read_list<int>(L, f, "tp");
  space.pp = read_list<int>(L, f, "pp");
  space.zero = read_list<int>(L, f, "zero");
  space.interleave = read_list<int>(L, f, "interleave");
  space.ep = read_list<int>(L, f, "ep");
  space.search_recompute = f.boolean("recompute").value_or(false);
  space.search_cp = f.boolean("cp").value_or(false);
  space.uneven_pp = f.boolean("uneven_pp").value_or(false);
  space.threads = static_cast<int>(f.integer("threads").value_or(0));

  Hardware hw;
  const int hw_type = f.push("hardware");
  if (hw_type == LUA_TSTRING)
    hw = lookup_hardware(L, lua_tostring(L, -1));
  else if (hw_type == LUA_TTABLE)
    hw = to_hardware(L, -1, fmt::format("{} hardware", search_what));
  lua_pop(L, 1);
  if (hw_type == LUA_TNIL) {
    if (s.hardware.empty())
      throw ConfigError(fmt::format("{}: the scenario lists no hardware; give hardware = \"H100-SXM\"", search_what));
    hw = s.hardware.front();
  } else if (hw_type != LUA_TSTRING && hw_type != LUA_TTABLE) {
    throw ConfigError(fmt::format("{}: hardware must be a catalog name or a hardware table", search_what));
  }

  const SearchResult r = search_layouts(s.model, s.workload, stack, step, layout, hw, space);
  const std::size_t shown = std::min<std::size_t>(r.layouts.size(), static_cast<std::size_t>(top));
  lua_createtable(L, static_cast<int>(shown), 6);
  for (std::size_t i = 0; i < shown; ++i) {
    push_row(L, r.layouts[i], i + 1);
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  push_counts(L, r);
  lua_setfield(L, -2, "counts");
  set_number(L, "gpus", r.gpus);
  set_number(L, "global_batch", static_cast<double>(r.global_batch));
  set_string(L, "hardware", r.hardware);
  set_string(L, "model", r.model);
  return 1;
}

}  // namespace perfsim::dsl
