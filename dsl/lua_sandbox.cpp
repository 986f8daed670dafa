// The file sandbox, perfsim.write and the time and memory limits of a script run.
#include "dsl/lua_sandbox.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/deadline.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace fs = std::filesystem;

namespace {

const char* const write_advice =
    "scripts cannot write files; use perfsim.write(name, text) with --output-dir DIR, or run "
    "with --unsafe";

fs::path canonical_or_lexical(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) return fs::absolute(p).lexically_normal();
  return c;
}

// Whether `path` is `root` or lies under it (both canonical).
bool is_under(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

// Throws unless the script may read `path`: under its directory, a module path directory, the
// output directory or a path named on the command line.
void check_readable(lua_State* L, const std::string& path, const char* what) {
  const ScriptContext& ctx = context(L);
  std::vector<std::string> roots = module_search_dirs(L);
  for (const std::string& p : ctx.settings.readable_paths) roots.push_back(p);
  if (!ctx.settings.output_dir.empty()) roots.push_back(ctx.settings.output_dir);
  const fs::path target = canonical_or_lexical(path);
  for (const std::string& root : roots)
    if (!root.empty() && is_under(target, canonical_or_lexical(root))) return;
  throw std::runtime_error(fmt::format(
      "{}('{}'): scripts may read only files under the script's directory, the module path "
      "(--module-path, $PERFSIM_PATH) or named on the command line; run with --unsafe to read "
      "anything",
      what, path));
}

[[noreturn]] void refuse_write(const std::string& call) {
  throw std::runtime_error(fmt::format("{}: {}", call, write_advice));
}

// Calls upvalue 1 (the library's own function) with the arguments; returns its results.
int call_original(lua_State* L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

std::string arg_string(lua_State* L, int index) {
  size_t n = 0;
  const char* s = lua_tolstring(L, index, &n);
  return s != nullptr ? std::string(s, n) : std::string();
}

int safe_open(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) throw std::runtime_error("io.open expects a file name (a string)");
  const std::string path = arg_string(L, 1);
  const std::string mode = lua_isnoneornil(L, 2) ? "r" : arg_string(L, 2);
  if (mode != "r" && mode != "rb") refuse_write(fmt::format("io.open('{}', '{}')", path, mode));
  check_readable(L, path, "io.open");
  return call_original(L);
}

// io.lines, io.input, dofile, loadfile: a file name argument must be readable.
template <const char* Name>
int safe_read_call(lua_State* L) {
  if (lua_type(L, 1) == LUA_TSTRING) check_readable(L, arg_string(L, 1), Name);
  return call_original(L);
}

int safe_output(lua_State* L) {
  if (lua_type(L, 1) == LUA_TSTRING) refuse_write(fmt::format("io.output('{}')", arg_string(L, 1)));
  return call_original(L);
}

int refuse_tmpname(lua_State*) { refuse_write("os.tmpname()"); }

int refuse_sethook(lua_State*) {
  throw std::runtime_error("debug.sethook: scripts cannot change the hook that enforces --timeout; "
                           "run with --unsafe");
}

constexpr char io_lines_name[] = "io.lines";
constexpr char io_input_name[] = "io.input";
constexpr char dofile_name[] = "dofile";
constexpr char loadfile_name[] = "loadfile";

// Replaces table[field] (or the global when table is null) by f with the old value as upvalue.
void wrap(lua_State* L, const char* table, const char* field, lua_CFunction f) {
  if (table != nullptr) {
    lua_getglobal(L, table);
    if (!lua_istable(L, -1)) {
      lua_pop(L, 1);
      return;
    }
  } else {
    lua_pushvalue(L, LUA_GLOBALSINDEX);
  }
  lua_getfield(L, -1, field);
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, -2, field);
  lua_pop(L, 1);
}

}  // namespace

void install_file_sandbox(lua_State* L) {
  wrap(L, "io", "open", guarded<safe_open>);
  wrap(L, "io", "lines", guarded<safe_read_call<io_lines_name>>);
  wrap(L, "io", "input", guarded<safe_read_call<io_input_name>>);
  wrap(L, "io", "output", guarded<safe_output>);
  wrap(L, nullptr, "dofile", guarded<safe_read_call<dofile_name>>);
  wrap(L, nullptr, "loadfile", guarded<safe_read_call<loadfile_name>>);
  wrap(L, "os", "tmpname", guarded<refuse_tmpname>);
  wrap(L, "debug", "sethook", guarded<refuse_sethook>);
}

int api_write(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING)
    throw std::runtime_error("perfsim.write expects a file name and a string: perfsim.write(name, text)");
  if (lua_type(L, 2) != LUA_TSTRING && lua_type(L, 2) != LUA_TNUMBER)
    throw std::runtime_error(fmt::format("perfsim.write('{}', text): text must be a string (got a {})",
                                         arg_string(L, 1), lua_typename(L, lua_type(L, 2))));
  const std::string name = arg_string(L, 1);
  const std::string text = arg_string(L, 2);
  const ScriptContext& ctx = context(L);
  if (ctx.settings.output_dir.empty())
    throw std::runtime_error(fmt::format(
        "perfsim.write('{}'): no output directory; run with --output-dir DIR to write files under DIR",
        name));
  const fs::path rel(name);
  bool dotdot = false;
  for (const fs::path& part : rel)
    if (part == "..") dotdot = true;
  if (name.empty() || rel.is_absolute() || dotdot || !rel.has_filename())
    throw std::runtime_error(fmt::format(
        "perfsim.write('{}'): name a file inside --output-dir with a relative path without '..'", name));
  const fs::path dir(ctx.settings.output_dir);
  const fs::path target = dir / rel;
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec)
    throw std::runtime_error(fmt::format("perfsim.write('{}'): cannot create '{}': {}", name,
                                         target.parent_path().string(), ec.message()));
  // A link inside the output directory must not lead out of it.
  if (!is_under(canonical_or_lexical(target), canonical_or_lexical(dir)))
    throw std::runtime_error(fmt::format("perfsim.write('{}'): '{}' leads outside --output-dir", name,
                                         target.string()));
  const std::string path = target.string();
  const std::string tmp = path + ".tmp";
  int err = 0;
  if (std::FILE* f = std::fopen(tmp.c_str(), "wb")) {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) err = errno ? errno : EIO;
    if (std::fflush(f) != 0 && err == 0) err = errno ? errno : EIO;
    if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
    if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno ? errno : EIO;
    if (err != 0) std::remove(tmp.c_str());
  } else {
    err = errno ? errno : EIO;
  }
  if (err != 0)
    throw std::runtime_error(
        fmt::format("perfsim.write('{}'): cannot write '{}': {}", name, path, std::strerror(err)));
  lua_pushlstring(L, path.data(), path.size());
  return 1;
}

void check_limits(lua_State* L, void (*before_error)(lua_State*)) {
  const ScriptContext& ctx = context(L);
  std::string message;
  if (deadline_passed()) {
    // The script's own --timeout, or an earlier limit in force around it (the run's).
    try {
      check_deadline();
    } catch (const TimeLimitError& e) {
      message = script_where(L) + e.what();
    }
  } else if (ctx.settings.memory_limit > 0) {
    const std::size_t used = static_cast<std::size_t>(lua_gc(L, LUA_GCCOUNT, 0)) * 1024;
    if (used > ctx.settings.memory_limit) {
      lua_gc(L, LUA_GCCOLLECT, 0);  // count only what is still reachable
      const std::size_t live = static_cast<std::size_t>(lua_gc(L, LUA_GCCOUNT, 0)) * 1024;
      if (live > ctx.settings.memory_limit)
        message = script_where(L) +
                  fmt::format("script used more than {} MiB of memory (a table or string that "
                              "grows without end?)",
                              ctx.settings.memory_limit >> 20);
    }
  }
  if (message.empty()) return;
  before_error(L);
  lua_pushlstring(L, message.data(), message.size());
  message = std::string();
  lua_error(L);
}

}  // namespace perfsim::dsl
