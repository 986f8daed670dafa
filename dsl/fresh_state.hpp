// Running a function in a fresh Lua state with the stdlib loaded, for C++ callers of the
// catalogs and profiles (no script): Lua errors come back as ScriptError or ConfigError.
#pragma once
#include <string>

#include "core/errors.hpp"
#include "dsl/dsl.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

// f(lua_State*) in a new state whose `require` searches `module_path` first. A Lua error
// becomes `Error` (ScriptError for catalogs, ConfigError for profiles).
template <typename Error, typename F>
auto in_fresh_state(const std::string& module_path, F&& f) {
  ScriptContext ctx;
  ctx.settings.module_path = module_path;
  // Profiles and catalogs are data: a loop in one is a broken file, not a long computation.
  ctx.settings.timeout_s = 10;
  LuaState state(ctx);
  try {
    return f(state.get());
  } catch (const LuaError& e) {
    throw Error(e.what());
  }
}

}  // namespace perfsim::dsl
