// The Lua state of one script run: lifecycle, sandbox, the module loader (module_path,
// $PERFSIM_PATH, script directory, embedded stdlib), protected calls with tracebacks, and the
// bridge that turns C++ exceptions raised by API functions into Lua errors at the script's line.
#pragma once
#include <lua.hpp>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/deadline.hpp"
#include "dsl/script_context.hpp"

namespace perfsim::dsl {

// A Lua error caught by C++ whose message already says where it happened.
struct LuaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown to stop the script early (DslSettings::options_only) once its options are known.
struct StopScript {};

class LuaState {
 public:
  // Opens the libraries, sandboxes them, installs require and the perfsim API and loads the
  // prelude. `ctx` must outlive the state.
  explicit LuaState(ScriptContext& ctx);
  ~LuaState();
  LuaState(const LuaState&) = delete;
  LuaState& operator=(const LuaState&) = delete;

  [[nodiscard]] lua_State* get() const { return m_L; }
  // Pushes the chunk of `file`; throws ScriptError when it cannot be read or parsed.
  void load_file(const std::string& file);
  // Calls the function below `nargs` arguments with a traceback handler.
  // Returns false when the script was stopped by StopScript; throws ScriptError on errors.
  bool call(int nargs, int nresults);
  // Pushes require(name); throws ScriptError on errors.
  void require(const std::string& name);

  // The Lua heap: its cap (settings.memory_limit, 0 = none), its size, and whether the cap
  // refused an allocation.
  struct Memory {
    std::size_t limit = 0;
    std::size_t used = 0;
    bool refused = false;
  };

 private:
  [[nodiscard]] std::string memory_message() const;

  lua_State* m_L = nullptr;
  ScriptContext& m_ctx;
  Memory m_memory;
  // settings.timeout_s from the state's creation, over the script and the work it asks for
  // (core/deadline.hpp).
  std::optional<DeadlineScope> m_deadline;
};

[[nodiscard]] ScriptContext& context(lua_State* L);

// The directories `require` searches before the embedded stdlib, in order (--module-path,
// $PERFSIM_PATH, the script's directory).
[[nodiscard]] std::vector<std::string> module_search_dirs(lua_State* L);

// "file:line: " of the innermost frame running a script or user module file (stdlib and C
// frames are skipped), or "" when no such frame is active.
[[nodiscard]] std::string script_where(lua_State* L);

// Calls the function below `nargs` arguments in protected mode; a Lua error becomes LuaError
// (or StopScript). For use inside API functions, where errors carry their location already.
void pcall_or_throw(lua_State* L, int nargs, int nresults);

// Pushes the error object used to stop a script early.
void push_stop_marker(lua_State* L);

namespace detail {
// Runs f; a C++ exception it throws becomes a Lua error (see guarded).
int run_guarded(lua_State* L, int (*f)(lua_State*));
}  // namespace detail

// Wraps an API function: C++ exceptions become Lua errors prefixed with the script location.
// Inside F errors are thrown, never raised with lua_error, so no C++ frame is skipped.
template <int (*F)(lua_State*)>
int guarded(lua_State* L) {
  return detail::run_guarded(L, F);
}

// Keeps the stack height of a C++ caller across exceptions.
class StackRestore {
 public:
  explicit StackRestore(lua_State* L) : m_L(L), m_top(lua_gettop(L)) {}
  ~StackRestore() { lua_settop(m_L, m_top); }
  StackRestore(const StackRestore&) = delete;
  StackRestore& operator=(const StackRestore&) = delete;

 private:
  lua_State* m_L;
  int m_top;
};

}  // namespace perfsim::dsl
