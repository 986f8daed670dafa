// The Lua environment of scripts, built from an allow-list: each library opened by hand, then
// cut to what a workload description needs. What is left out, and why:
//   - debug (but debug.traceback): it reads upvalues and the registry, where the sandbox keeps
//     the unwrapped library functions and perfsim its state; it sets hooks;
//   - string.dump, and bytecode in load/loadstring/loadfile: LuaJIT does not verify bytecode,
//     and a crafted chunk crashes the process;
//   - jit, ffi, string.buffer, package.loadlib, package.cpath: native code and addresses;
//   - coroutine: each nested resume takes C stack, so a recursion through coroutine.wrap ends
//     in a crash, not an error;
//   - newproxy: userdata finalizers run with the time limit's hook off, so a loop in one could
//     never be stopped;
//   - os.exit, os.setlocale (it changes how perfsim prints numbers), io.popen, io.tmpfile,
//     os.execute, os.remove, os.rename, os.tmpname (the last five come back with --unsafe).
#include "dsl/lua_libraries.hpp"

#include "dsl/lua_sandbox.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace {

void open_library(lua_State* L, lua_CFunction open, const char* name) {
  lua_pushcfunction(L, open);
  lua_pushstring(L, name);
  lua_call(L, 1, 0);
}

// What a script gets in place of a function it may not call: an error at its line naming the
// function (upvalue 1) and why (upvalue 2). The error names the script line that asked, past
// any C function between (require's loader).
int refused_function(lua_State* L) {
  lua_Debug ar;
  bool located = false;
  for (int level = 1; !located && lua_getstack(L, level, &ar) != 0; ++level) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      located = true;
    }
  }
  if (!located) lua_pushliteral(L, "");
  lua_pushfstring(L, "%s is not available to scripts (%s)", lua_tostring(L, lua_upvalueindex(1)),
                  lua_tostring(L, lua_upvalueindex(2)));
  lua_concat(L, 2);
  return lua_error(L);
}

void push_refusal(lua_State* L, const char* name, const char* why) {
  lua_pushstring(L, name);
  lua_pushstring(L, why);
  lua_pushcclosure(L, refused_function, 2);
}

// __index of the debug table: debug.X for any X but traceback.
int refused_debug_field(lua_State* L) {
  lua_pushfstring(L, "debug.%s", luaL_optstring(L, 2, "?"));
  push_refusal(L, lua_tostring(L, -1), "only debug.traceback is; the rest reaches into perfsim's own state");
  return 1;
}

// table.field (a global when table is null) becomes a refusal.
void refuse(lua_State* L, const char* table, const char* field, const char* why) {
  if (table == nullptr) {
    push_refusal(L, field, why);
    lua_setglobal(L, field);
    return;
  }
  lua_getglobal(L, table);
  if (lua_istable(L, -1)) {
    lua_pushfstring(L, "%s.%s", table, field);
    push_refusal(L, lua_tostring(L, -1), why);
    lua_setfield(L, -3, field);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

// A module `require` finds as a loader that says why it is refused.
void refuse_module(lua_State* L, const char* name, const char* why) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_pushnil(L);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
  lua_getfield(L, -1, "preload");
  lua_pushfstring(L, "module '%s'", name);
  push_refusal(L, lua_tostring(L, -1), why);
  lua_setfield(L, -3, name);
  lua_pop(L, 3);
}

void set_nil(lua_State* L, const char* table, const char* field) {
  lua_getglobal(L, table);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    lua_setfield(L, -2, field);
  }
  lua_pop(L, 1);
}

// load(chunk [, name [, mode [, env]]]) and loadstring(text [, name]), in text mode whatever
// mode is asked. Return the chunk, or nil and a message, as Lua's do.
int text_load(lua_State* L) {
  if (lua_type(L, 1) == LUA_TSTRING) {
    size_t n = 0;
    const char* s = lua_tolstring(L, 1, &n);
    const char* name = luaL_optstring(L, 2, s);
    const int env = lua_gettop(L) >= 4 && !lua_isnil(L, 4) ? 4 : 0;
    if (load_text_chunk(L, std::string(s, n), name) != 0) {
      lua_pushnil(L);
      lua_insert(L, -2);
      return 2;
    }
    if (env != 0) {
      lua_pushvalue(L, env);
      lua_setfenv(L, -2);
    }
    return 1;
  }
  if (lua_type(L, 1) != LUA_TFUNCTION) {
    lua_pushnil(L);
    lua_pushstring(L, "load expects a string or a function");
    return 2;
  }
  // A reader function: the library's own load, told text mode.
  const bool env = lua_gettop(L) >= 4 && !lua_isnil(L, 4);
  const bool named = !lua_isnoneornil(L, 2);
  const int base = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, "perfsim.load");
  lua_pushvalue(L, 1);
  if (named)
    lua_pushvalue(L, 2);
  else
    lua_pushliteral(L, "=(load)");
  lua_pushliteral(L, "t");
  if (env) lua_pushvalue(L, 4);
  lua_call(L, env ? 4 : 3, LUA_MULTRET);
  return lua_gettop(L) - base;
}

}  // namespace

void open_script_libraries(lua_State* L, bool unsafe) {
  open_library(L, luaopen_base, "");
  open_library(L, luaopen_package, LUA_LOADLIBNAME);
  open_library(L, luaopen_table, LUA_TABLIBNAME);
  open_library(L, luaopen_string, LUA_STRLIBNAME);
  open_library(L, luaopen_math, LUA_MATHLIBNAME);
  open_library(L, luaopen_io, LUA_IOLIBNAME);
  open_library(L, luaopen_os, LUA_OSLIBNAME);
  open_library(L, luaopen_bit, LUA_BITLIBNAME);

  // debug: only traceback, a copy taken before the library is dropped.
  open_library(L, luaopen_debug, LUA_DBLIBNAME);
  lua_getglobal(L, LUA_DBLIBNAME);
  lua_getfield(L, -1, "traceback");
  lua_newtable(L);
  lua_insert(L, -2);
  lua_setfield(L, -2, "traceback");
  // Any other debug.X is a refusal that says so.
  lua_newtable(L);
  lua_pushcfunction(L, refused_debug_field);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setglobal(L, LUA_DBLIBNAME);
  lua_pop(L, 1);

  const char* native = "native code is never loaded, even with --unsafe";
  refuse_module(L, "ffi", native);
  for (const char* m : {"jit", "jit.util", "jit.opt", "jit.profile", "jit.vmdef", "jit.dump", "jit.v", "jit.bcsave"})
    refuse_module(L, m, native);
  refuse_module(L, "string.buffer", native);
  refuse_module(L, "coroutine", "scripts describe workloads; they run no coroutines");
  refuse_module(L, "debug", "only debug.traceback is available");
  lua_pushnil(L);
  lua_setglobal(L, "coroutine");
  refuse(L, "package", "loadlib", native);
  lua_getglobal(L, "package");
  lua_pushliteral(L, "");
  lua_setfield(L, -2, "cpath");
  lua_pop(L, 1);

  refuse(L, "string", "dump", "scripts load Lua source only, never bytecode");
  refuse(L, nullptr, "newproxy", "finalizers could outrun --timeout");
  refuse(L, "os", "exit", "perfsim ends the run; return from the script or call error()");
  refuse(L, "os", "setlocale", "perfsim's output depends on the C locale");
  const char* writes = "scripts cannot start programs or change files; run with --unsafe to allow it";
  if (!unsafe) {
    for (const char* f : {"execute", "remove", "rename", "tmpname"}) refuse(L, "os", f, writes);
    for (const char* f : {"popen", "tmpfile"}) refuse(L, "io", f, writes);
  }

  // Text-only loading; the library's load stays in the registry for reader functions.
  lua_getglobal(L, "load");
  lua_setfield(L, LUA_REGISTRYINDEX, "perfsim.load");
  lua_pushcfunction(L, text_load);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "load");
  lua_setglobal(L, "loadstring");
  install_file_loaders(L);
  if (!unsafe) install_file_sandbox(L);
  set_nil(L, "package", "path");  // `require` searches perfsim's own places (lua_state.cpp)
}

}  // namespace perfsim::dsl
