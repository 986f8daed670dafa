// run_script: runs a scenario script in a fresh sandboxed state and collects what it declared:
// options, the scenario it returned (or the last one it built) and the expanded sweep.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "core/errors.hpp"
#include "core/large_stack.hpp"
#include "core/text.hpp"
#include "dsl/dsl.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_scenario.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim {

namespace {

// Every --set must name an option the script declared.
void check_overrides(const dsl::ScriptContext& ctx) {
  std::vector<std::string> declared;
  for (const ScriptOption& o : ctx.options) declared.push_back(o.name);
  for (const auto& [name, value] : ctx.settings.overrides) {
    if (std::find(declared.begin(), declared.end(), name) != declared.end()) continue;
    if (declared.empty())
      throw ConfigError(fmt::format("unknown option '{}' for {}: the script declares no options",
                                    name, ctx.file));
    throw ConfigError(fmt::format("unknown option '{}' for {}{}; declared: {}", name, ctx.file,
                                  did_you_mean(name, declared), fmt::join(declared, ", ")));
  }
}

// Listing options (--help) must not show a plain script's own output, which it prints as it
// runs up to its first perfsim.predict/measure.
void silence_output(lua_State* L) {
  const lua_CFunction nothing = [](lua_State*) -> int { return 0; };
  lua_pushcfunction(L, nothing);
  lua_setglobal(L, "print");
  lua_getglobal(L, "io");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, nothing);
    lua_setfield(L, -2, "write");
  }
  lua_pop(L, 1);
}

}  // namespace

namespace {

ScriptOutcome run_script_here(const std::string& file, const DslSettings& settings) {
  dsl::ScriptContext ctx;
  ctx.settings = settings;
  ctx.file = file;
  const std::filesystem::path parent = std::filesystem::path(file).parent_path();
  ctx.dir = parent.empty() ? "." : parent.string();

  dsl::LuaState state(ctx);
  lua_State* L = state.get();
  if (settings.options_only) silence_output(L);
  state.load_file(file);
  const bool finished = state.call(0, 1);

  ScriptOutcome out;
  out.options = ctx.options;
  if (!finished || settings.options_only) return out;
  check_overrides(ctx);

  std::optional<dsl::BuiltScenario> chosen;
  if (lua_istable(L, -1)) {
    if (auto id = dsl::built_scenario_id(L, -1)) {
      chosen = ctx.scenarios.at(*id);
    } else {
      // A plain table returned without scenario{}: read it the same way.
      try {
        chosen = dsl::build_scenario(L, -1, "the returned scenario");
      } catch (const std::exception& e) {
        throw ScriptError(fmt::format("{}: {}", file, e.what()));
      }
    }
  } else if (!lua_isnil(L, -1)) {
    throw ScriptError(fmt::format("{}: the script returned {}; return scenario{{...}} or nothing",
                                  file, dsl::describe_value(L, -1)));
  } else if (!ctx.scenarios.empty()) {
    chosen = ctx.scenarios.back();
  }
  lua_pop(L, 1);
  if (chosen) {
    out.scenario = std::move(chosen->scenario);
    out.points = std::move(chosen->points);
  }
  return out;
}

}  // namespace

ScriptOutcome run_script(const std::string& file, const DslSettings& settings) {
  // Deep recursion in a script ends in the interpreter's error, not a crash (core/large_stack.hpp).
  return on_large_stack([&] { return run_script_here(file, settings); });
}

}  // namespace perfsim
