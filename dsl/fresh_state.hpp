// Running a function in a fresh Lua state with the stdlib loaded, for C++ callers of the
// catalogs and profiles (no script): Lua errors come back as ScriptError or ConfigError.
#pragma once
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/large_stack.hpp"
#include "dsl/dsl.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

// f(lua_State*) in a new state whose `require` searches `module_path` first. A Lua error
// becomes `Error` (ScriptError for catalogs, ConfigError for profiles).
// `readable`: files named by the caller (a --profile FILE) that the state may read besides the
// module path.
template <typename Error, typename F>
auto in_fresh_state(const std::string& module_path, F&& f, const std::vector<std::string>& readable = {}) {
  // A profile file is a script too: its recursion ends in an error (core/large_stack.hpp).
  return on_large_stack([&] {
    ScriptContext ctx;
    ctx.settings.module_path = module_path;
    ctx.settings.readable_paths = readable;
    // Profiles and catalogs are data: a loop in one is a broken file, not a long computation.
    ctx.settings.timeout_s = 10;
    LuaState state(ctx);
    try {
      return f(state.get());
    } catch (const LuaError& e) {
      throw Error(e.what());
    }
  });
}

}  // namespace perfsim::dsl
