// Lua state lifecycle: sandboxed libraries, `require` over module_path, $PERFSIM_PATH, the
// script's directory and the embedded stdlib, and protected calls that end in ScriptError
// with "file:line: message" plus a traceback.
#include "dsl/lua_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/text.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"
#include "dsl/lua_api.hpp"
#include "dsl/lua_libraries.hpp"
#include "dsl/lua_sandbox.hpp"
#include "dsl/stdlib_files.hpp"

namespace perfsim::dsl {

namespace {

constexpr const char* context_key = "perfsim.context";
constexpr const char* state_key = "perfsim.state";
// Its address identifies the error object that stops a script early.
char stop_marker_tag;

bool is_stop_marker(lua_State* L, int index) {
  return lua_type(L, index) == LUA_TLIGHTUSERDATA && lua_touserdata(L, index) == &stop_marker_tag;
}

std::vector<std::string> split_path_list(const std::string& list) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : list) {
    if (c == ':' || c == ';') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Directories `require` searches before the embedded stdlib, in order.
std::vector<std::string> search_dirs(const ScriptContext& ctx) {
  std::vector<std::string> dirs = split_path_list(ctx.settings.module_path);
  if (const char* env = std::getenv("PERFSIM_PATH"))
    for (auto& d : split_path_list(env)) dirs.push_back(d);
  if (!ctx.file.empty()) dirs.push_back(ctx.dir);
  return dirs;
}

std::string error_text(lua_State* L, int index) {
  if (const char* s = lua_tostring(L, index)) return s;
  return fmt::format("(error object is a {} value)", lua_typename(L, lua_type(L, index)));
}

// Lua shortens long chunk names to "...tail"; put the script's full path back.
std::string restore_long_path(const std::string& msg, const std::string& file) {
  if (file.empty() || msg.rfind("...", 0) != 0) return msg;
  const std::string rest = msg.substr(3);
  for (std::size_t pos = rest.find(':'); pos != std::string::npos; pos = rest.find(':', pos + 1)) {
    const std::string head = rest.substr(0, pos);
    if (file.size() >= head.size() && file.compare(file.size() - head.size(), head.size(), head) == 0)
      return file + rest.substr(pos);
  }
  return msg;
}

// Line hook: remembers the last line of the script that ran, for errors after a tail call.
// Count hook (every count_hook_instructions): stops a script past --timeout or the memory cap.
constexpr int count_hook_instructions = 10000;
void line_hook(lua_State* L, lua_Debug* ar) {
  if (ar->event == LUA_HOOKCOUNT) {
    check_time_limit(L, [](lua_State* S) { lua_sethook(S, line_hook, LUA_MASKLINE | LUA_MASKCOUNT, 1); });
    return;
  }
  if (lua_getinfo(L, "S", ar) == 0 || ar->source == nullptr || ar->source[0] != '@') return;
  ScriptContext& ctx = context(L);
  if (ctx.file == ar->source + 1) ctx.last_line.store(ar->currentline, std::memory_order_relaxed);
}

// Where a function tail-called by the script was called. The call replaced the script's frame,
// and LuaJIT reports no line event for the call itself, so the last line that ran is the end of
// the argument list; the call starts at the nearest `return f{` / `return f(` at or above it.
std::string tail_call_where(const ScriptContext& ctx) {
  if (ctx.last_line <= 0) return "";
  std::ifstream in(ctx.file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  static const std::regex tail_call(R"((^|[^\w])return\s+[A-Za-z_][\w.:]*\s*[{("'])");
  int line = ctx.last_line;
  for (int l = std::min<int>(ctx.last_line, static_cast<int>(lines.size())); l >= 1; --l)
    if (std::regex_search(lines[static_cast<std::size_t>(l - 1)], tail_call)) {
      line = l;
      break;
    }
  return fmt::format("{}:{}: ", ctx.file, line);
}

// The name a script calls the function at stack `level` by: a global ("scenario") or a member
// of the perfsim table ("perfsim.predict"); "" when it is neither.
std::string api_name(lua_State* L, int level) {
  lua_Debug ar;
  if (lua_getstack(L, level, &ar) == 0 || lua_getinfo(L, "f", &ar) == 0) return "";
  const int fn = lua_gettop(L);
  std::string found;
  auto search = [&](int table, const std::string& prefix) {
    lua_pushnil(L);
    while (lua_next(L, table) != 0) {
      if (found.empty() && lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, fn))
        found = prefix + lua_tostring(L, -2);
      lua_pop(L, 1);
    }
  };
  search(LUA_GLOBALSINDEX, "");
  lua_getglobal(L, "perfsim");
  if (found.empty() && lua_istable(L, -1)) search(lua_gettop(L), "perfsim.");
  lua_settop(L, fn - 1);
  return found;
}

// LuaJIT prints a C function it cannot name as "[C]: at 0x55d5...", which happens when the
// script tail-called it (`return scenario {...}`); the script's own frame is then gone too.
// Name the function and put the script's line back, so the traceback says where to look.
std::string tidy_traceback(lua_State* L, const std::string& traceback, const ScriptContext& ctx) {
  static const std::regex unnamed(R"(^\t\[C\]: at 0x[0-9a-fA-F]+$)");
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = traceback.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(traceback.substr(start, nl - start));
  lines.push_back(traceback.substr(start));
  const auto header = std::find(lines.begin(), lines.end(), "stack traceback:");
  if (header == lines.end()) return traceback;
  bool names_script = false;
  int level = 1;  // the frames after the header start at level 1 (the handler is level 0)
  for (auto it = header + 1; it != lines.end(); ++it, ++level) {
    if (!ctx.file.empty() && it->find(ctx.file + ":") != std::string::npos) names_script = true;
    if (!std::regex_match(*it, unnamed)) continue;
    const std::string name = api_name(L, level);
    *it = name.empty() ? "\t[C]: in a perfsim function" : "\t[C]: in function '" + name + "'";
  }
  std::string out;
  for (const std::string& line : lines) out += (out.empty() ? "" : "\n") + line;
  if (!names_script) {
    const std::string where = tail_call_where(ctx);  // "file:line: " or ""
    if (!where.empty()) out += "\n\t" + where + "in the script (tail call)";
  }
  return out;
}

int traceback_handler(lua_State* L) {
  if (is_stop_marker(L, 1)) return 1;
  const ScriptContext& ctx = context(L);
  const std::string text = restore_long_path(error_text(L, 1), ctx.file);
  // A wrong value given to a perfsim function: its message says where and what to change.
  if (!ctx.config_error.empty() && error_text(L, 1) == ctx.config_error) {
    lua_pushlstring(L, text.data(), text.size());
    return 1;
  }
  luaL_traceback(L, L, text.c_str(), 1);
  const std::string traceback = tidy_traceback(L, lua_tostring(L, -1), ctx);
  lua_pop(L, 1);
  lua_pushlstring(L, traceback.data(), traceback.size());
  return 1;
}

// package.loaders entry: module_path, $PERFSIM_PATH, script directory, then the stdlib.
int module_loader(lua_State* L) {
  const char* raw = lua_tostring(L, 1);
  if (raw == nullptr) throw std::runtime_error("require expects a module name (a string)");
  const std::string name = raw;
  std::string rel = name;
  for (char& c : rel)
    if (c == '.') c = '/';
  const ScriptContext& ctx = context(L);
  // The runtime's own modules always come from the binary; only the catalogs (hardware,
  // models, stacks) and user modules are looked up in directories.
  const bool runtime_module = name == "prelude" || name == "perfsim";
  std::string tried;
  for (const std::string& dir : runtime_module ? std::vector<std::string>{} : search_dirs(ctx)) {
    for (const std::string& candidate : {dir + "/" + rel + ".lua", dir + "/" + rel + "/init.lua"}) {
      std::error_code ec;
      // A script named like a module (perfsim.lua, models.lua) is not that module.
      const bool is_script = !ctx.file.empty() && std::filesystem::equivalent(candidate, ctx.file, ec);
      if (!std::filesystem::is_regular_file(candidate, ec) || is_script) {
        tried += "\n\tno file '" + candidate + "'";
        continue;
      }
      // Through the sandbox too: a module file that is a link must not lead outside.
      const std::string text = read_script_file(L, candidate, "require");
      if (load_text_chunk(L, text, "@" + candidate) != 0) throw LuaError(error_text(L, -1));
      return 1;
    }
  }
  for (const EmbeddedFile& f : stdlib_files()) {
    if (f.name != name) continue;
    const std::string chunk = "=stdlib/" + name + ".lua";
    if (luaL_loadbufferx(L, f.source.data(), f.source.size(), chunk.c_str(), "t") != 0)
      throw LuaError(error_text(L, -1));
    return 1;
  }
  tried += "\n\tno module '" + name + "' in the embedded stdlib";
  lua_pushlstring(L, tried.data(), tried.size());
  return 1;
}

// `require` searches the preload table (the refused modules' loaders) then perfsim's places
// (module_loader); package.path and the C-library searchers are gone.
void install_module_loader(lua_State* L) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaders");
  lua_newtable(L);
  lua_rawgeti(L, -2, 1);
  lua_rawseti(L, -2, 1);
  lua_pushcfunction(L, guarded<module_loader>);
  lua_rawseti(L, -2, 2);
  lua_setfield(L, -3, "loaders");
  lua_pop(L, 2);
}

// " (did you mean 'scenarios/llm_decode.lua'?)" for a misspelt script name, from the .lua
// files of the directory it names; "" when none is close.
std::string similar_script(const std::string& file) {
  const std::filesystem::path path(file);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".lua") names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());  // directory order is arbitrary
  const std::string match = closest_match(path.filename().string(), names);
  if (match.empty()) return "";
  return fmt::format(" (did you mean '{}'?)", (path.parent_path() / match).string());
}

}  // namespace

std::vector<std::string> module_search_dirs(lua_State* L) { return search_dirs(context(L)); }

ScriptContext& context(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, context_key);
  auto* ctx = static_cast<ScriptContext*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return *ctx;
}

std::string script_where(lua_State* L) {
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar) != 0; ++level) {
    if (lua_getinfo(L, "Sl", &ar) == 0) continue;
    if (ar.currentline > 0 && ar.source != nullptr && ar.source[0] == '@')
      return fmt::format("{}:{}: ", ar.source + 1, ar.currentline);
  }
  return tail_call_where(context(L));
}

void push_stop_marker(lua_State* L) { lua_pushlightuserdata(L, &stop_marker_tag); }

void pcall_or_throw(lua_State* L, int nargs, int nresults) {
  if (lua_pcall(L, nargs, nresults, 0) == 0) return;
  if (is_stop_marker(L, -1)) {
    lua_pop(L, 1);
    throw StopScript{};
  }
  std::string msg = error_text(L, -1);
  lua_pop(L, 1);
  throw LuaError(msg);
}

int detail::run_guarded(lua_State* L, int (*f)(lua_State*)) {
  {
    std::string message;
    bool stop = false;
    try {
      return f(L);
    } catch (const StopScript&) {
      stop = true;
    } catch (const LuaError& e) {
      message = e.what();
    } catch (const std::exception& e) {
      // An error that names its own place in this script (a stack step's line) keeps it.
      const std::string where = script_where(L);
      const std::string& file = context(L).file;
      const std::string what = e.what();
      message = !file.empty() && what.rfind(file + ":", 0) == 0 ? what : where + what;
      if (dynamic_cast<const ConfigError*>(&e) != nullptr) context(L).config_error = message;
    }
    if (stop)
      push_stop_marker(L);
    else
      lua_pushlstring(L, message.data(), message.size());
  }
  return lua_error(L);
}

namespace {

// The Lua heap's allocator: refuses to grow it past the cap (LuaJIT then raises "not enough
// memory", which the state reports as the memory cap), so one `s .. s` of a huge string cannot
// overshoot it between two checks.
void* capped_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* m = static_cast<LuaState::Memory*>(ud);
  const std::size_t old = ptr != nullptr ? osize : 0;
  if (nsize == 0) {
    std::free(ptr);
    m->used -= old;
    return nullptr;
  }
  if (nsize > old && m->limit > 0 && m->used + (nsize - old) > m->limit) {
    m->refused = true;
    return nullptr;
  }
  void* p = std::realloc(ptr, nsize);
  if (p == nullptr) return nullptr;
  m->used = m->used - old + nsize;
  return p;
}

}  // namespace

LuaState::LuaState(ScriptContext& ctx) : m_ctx(ctx) {
  m_memory.limit = m_ctx.settings.memory_limit;
  m_L = lua_newstate(capped_alloc, &m_memory);
  if (m_L == nullptr) throw ScriptError("cannot create a Lua state (out of memory)");
  try {
    lua_pushlightuserdata(m_L, &m_ctx);
    lua_setfield(m_L, LUA_REGISTRYINDEX, context_key);
    lua_pushlightuserdata(m_L, this);
    lua_setfield(m_L, LUA_REGISTRYINDEX, state_key);
    // Compiled traces skip the count hook (an empty `while true do end` would never reach
    // --timeout); scripts are short descriptions, so the interpreter is fast enough.
    luaJIT_setmode(m_L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    open_script_libraries(m_L, m_ctx.settings.unsafe);
    install_module_loader(m_L);
    install_api(m_L);
    lua_getglobal(m_L, "perfsim");
    lua_pushcfunction(m_L, guarded<api_write>);
    lua_setfield(m_L, -2, "write");
    lua_pop(m_L, 1);
    // Without a script file this is a profile or catalog being read (dsl/fresh_state.hpp).
    const double timeout = m_ctx.settings.timeout_s;
    const std::string what = m_ctx.file.empty()
                                 ? fmt::format("a profile or catalog file ran longer than {} s", timeout)
                                 : fmt::format("script ran longer than --timeout {} s", timeout);
    // A stop the hook cannot make (inside a library call or an error handler) ends the process a
    // moment later, at the last line the script ran.
    HardStop hard;
    hard.grace_s = std::max(1.0, 0.1 * timeout);
    hard.message = [this, what] {
      const int line = m_ctx.last_line.load();
      const std::string where = m_ctx.file.empty() ? "" : fmt::format("{}:{}: ", m_ctx.file, line);
      return where + what + " and could not be stopped there (a loop inside a library call such as "
                            "string.find, or in an error handler); stopped the process";
    };
    m_deadline.emplace(timeout,
                       what + (m_ctx.file.empty() ? " (a loop in it?)" : " (raise --timeout or fix the loop)"),
                       std::move(hard));
    require("prelude");
    lua_pop(m_L, 1);
    lua_sethook(m_L, line_hook, LUA_MASKLINE | LUA_MASKCOUNT, count_hook_instructions);
  } catch (...) {
    lua_close(m_L);
    throw;
  }
}

LuaState::~LuaState() { lua_close(m_L); }

void LuaState::load_file(const std::string& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw ScriptError(
        fmt::format("cannot read script '{}': it is a directory; name a .lua file in it", file));
  if (!std::filesystem::exists(file, ec))
    throw ScriptError(
        fmt::format("cannot read script '{}': no such file{}", file, similar_script(file)));
  std::string text;
  try {
    text = read_regular_file(file, "cannot read script");
  } catch (const ConfigError& e) {
    throw ScriptError(e.what());
  }
  if (load_text_chunk(m_L, text, "@" + file) != 0) {
    std::string msg = restore_long_path(error_text(m_L, -1), m_ctx.file);
    lua_pop(m_L, 1);
    throw ScriptError(msg);
  }
}

std::string LuaState::memory_message() const {
  return fmt::format("script used more than {} MiB of memory (a table or string that grows without end?)",
                     m_memory.limit >> 20);
}

bool LuaState::call(int nargs, int nresults) {
  const int base = lua_gettop(m_L) - nargs;  // the function's index
  lua_pushcfunction(m_L, traceback_handler);
  lua_insert(m_L, base);
  const int rc = lua_pcall(m_L, nargs, nresults, base);
  lua_remove(m_L, base);
  if (rc == 0) return true;
  if (is_stop_marker(m_L, -1)) {
    lua_pop(m_L, 1);
    return false;
  }
  std::string msg = error_text(m_L, -1);
  lua_pop(m_L, 1);
  // The allocator refused to pass the memory cap, or LuaJIT refused an object larger than it
  // holds (a 2 GiB string): say so, at the last line the script ran.
  if (msg.find("not enough memory") != std::string::npos) {
    const int line = m_ctx.last_line.load();
    msg = (m_ctx.file.empty() || line <= 0 ? "" : fmt::format("{}:{}: ", m_ctx.file, line)) + memory_message();
  }
  throw ScriptError(msg);
}

void LuaState::require(const std::string& name) {
  lua_getglobal(m_L, "require");
  lua_pushlstring(m_L, name.data(), name.size());
  if (!call(1, 1)) throw ScriptError(fmt::format("loading module '{}' stopped early", name));
}

}  // namespace perfsim::dsl
