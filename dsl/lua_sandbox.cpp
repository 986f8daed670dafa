// The file sandbox (what a script may read, and how), perfsim.write, and the time limit's hook.
#include "dsl/lua_sandbox.hpp"

#include <sys/stat.h>

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "core/files.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace fs = std::filesystem;

namespace {

constexpr const char* originals_key = "perfsim.originals";

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

// Throws unless `path` lies under the script's directory, a module path directory, the output
// directory or a path named on the command line (links resolved).
void check_allowed_place(lua_State* L, const std::string& path, const char* what) {
  const ScriptContext& ctx = context(L);
  if (ctx.settings.unsafe) return;
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

std::string arg_string(lua_State* L, int index) {
  size_t n = 0;
  const char* s = lua_tolstring(L, index, &n);
  return s != nullptr ? std::string(s, n) : std::string();
}

// The file name at `index` whatever its type: a number is a name too (io.lines(4242) reads
// ./4242), converted to its string in place so the library sees what was checked.
std::string file_name_arg(lua_State* L, int index, const char* what) {
  const int t = lua_type(L, index);
  if (t != LUA_TSTRING && t != LUA_TNUMBER)
    throw std::runtime_error(fmt::format("{} expects a file name (a string), got a {}", what, lua_typename(L, t)));
  lua_tolstring(L, index, nullptr);
  return arg_string(L, index);
}

// Calls the library's own function saved under the name in upvalue 1 (the originals live in
// the registry, which scripts cannot reach) with the arguments; returns its results.
int call_original(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, originals_key);
  lua_getfield(L, -1, lua_tostring(L, lua_upvalueindex(1)));
  lua_remove(L, -2);
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

int safe_open(lua_State* L) {
  const std::string path = file_name_arg(L, 1, "io.open");
  const std::string mode = lua_isnoneornil(L, 2) ? "r" : arg_string(L, 2);
  if (mode != "r" && mode != "rb") refuse_write(fmt::format("io.open('{}', '{}')", path, mode));
  check_script_readable(L, path, "io.open");
  return call_original(L);
}

// io.lines, io.input: a file name argument (nil reads standard input, a file handle is one
// already opened through io.open).
template <const char* Name>
int safe_read_call(lua_State* L) {
  const int t = lua_type(L, 1);
  if (t != LUA_TNONE && t != LUA_TNIL && t != LUA_TUSERDATA) {
    const std::string path = file_name_arg(L, 1, Name);
    check_script_readable(L, path, Name);
    std::error_code ec;
    if (!fs::exists(path, ec)) throw std::runtime_error(fmt::format("{}('{}'): no such file", Name, path));
  }
  return call_original(L);
}

int safe_output(lua_State* L) {
  if (!lua_isnoneornil(L, 1)) refuse_write(fmt::format("io.output({})", arg_string(L, 1)));
  return call_original(L);
}

// loadfile(name): the file through the checked reader, loaded as text. Returns the chunk, or
// nil and a message, as Lua's loadfile does.
int safe_loadfile(lua_State* L) {
  if (lua_isnoneornil(L, 1))
    throw std::runtime_error("loadfile needs a file name (scripts do not read chunks from standard input)");
  const std::string path = file_name_arg(L, 1, "loadfile");
  const std::string text = read_script_file(L, path, "loadfile");
  if (load_text_chunk(L, text, "@" + path) != 0) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  return 1;
}

constexpr char io_lines_name[] = "io.lines";
constexpr char io_input_name[] = "io.input";

// Saves table[field] (a global when table is null) in the originals and puts f in its place,
// with the original's registry name as upvalue 1.
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
  const std::string name = table != nullptr ? fmt::format("{}.{}", table, field) : field;
  lua_getfield(L, LUA_REGISTRYINDEX, originals_key);
  lua_getfield(L, -2, field);
  lua_setfield(L, -2, name.c_str());
  lua_pop(L, 1);
  lua_pushstring(L, name.c_str());
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, -2, field);
  lua_pop(L, 1);
}

}  // namespace

void check_script_readable(lua_State* L, const std::string& path, const char* what) {
  check_allowed_place(L, path, what);
  // A FIFO would block the open, a device never end: only regular files (links followed).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(fmt::format("{}('{}'): not a regular file (a directory, device or pipe); "
                                         "name a file",
                                         what, path));
}

std::string read_script_file(lua_State* L, const std::string& path, const char* what) {
  check_allowed_place(L, path, what);
  return read_regular_file(path, what);
}

int load_text_chunk(lua_State* L, const std::string& text, const std::string& chunk_name) {
  // LuaJIT does not verify bytecode: a crafted chunk can crash the process. Scripts are text.
  if (!text.empty() && text[0] == '\x1b') {
    const bool file = !chunk_name.empty() && chunk_name[0] == '@';
    lua_pushfstring(L, "%s: compiled Lua bytecode is refused; scripts, modules and profiles are Lua source text",
                    file ? chunk_name.c_str() + 1 : "load");
    return LUA_ERRSYNTAX;
  }
  return luaL_loadbufferx(L, text.data(), text.size(), chunk_name.c_str(), "t");
}

void install_file_sandbox(lua_State* L) {
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, originals_key);
  wrap(L, "io", "open", guarded<safe_open>);
  wrap(L, "io", "lines", guarded<safe_read_call<io_lines_name>>);
  wrap(L, "io", "input", guarded<safe_read_call<io_input_name>>);
  wrap(L, "io", "output", guarded<safe_output>);
}

void install_file_loaders(lua_State* L) {
  lua_pushcfunction(L, guarded<safe_loadfile>);
  lua_setglobal(L, "loadfile");
  // dofile(name) = loadfile(name)(): the same checks, the chunk's errors raised as they are.
  static const char dofile_source[] =
      "local loadfile, error = loadfile, error\n"
      "return function(name)\n"
      "  local chunk, message = loadfile(name)\n"
      "  if not chunk then error(message, 2) end\n"
      "  return chunk()\n"
      "end\n";
  if (luaL_loadbufferx(L, dofile_source, sizeof dofile_source - 1, "=dofile", "t") != 0 ||
      lua_pcall(L, 0, 1, 0) != 0)
    throw std::runtime_error("cannot set up dofile");
  lua_setglobal(L, "dofile");
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
  // A link inside the output directory must not lead out of it: checked before any directory
  // is made (through a link, it would be made outside) and again after.
  auto check_inside = [&] {
    if (!is_under(canonical_or_lexical(target), canonical_or_lexical(dir)))
      throw std::runtime_error(fmt::format("perfsim.write('{}'): '{}' leads outside --output-dir", name,
                                           target.string()));
  };
  check_inside();
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec)
    throw std::runtime_error(fmt::format("perfsim.write('{}'): cannot create '{}': {}", name,
                                         target.parent_path().string(), ec.message()));
  check_inside();
  const std::string path = target.string();
  try {
    write_file_atomically(path, text);
  } catch (const ConfigError& e) {
    throw std::runtime_error(fmt::format("perfsim.write('{}'): {}", name, e.what()));
  }
  lua_pushlstring(L, path.data(), path.size());
  return 1;
}

void check_time_limit(lua_State* L, void (*before_error)(lua_State*)) {
  if (!deadline_passed()) return;
  // The script's own --timeout, or an earlier limit in force around it (the run's).
  std::string message;
  try {
    check_deadline();
  } catch (const TimeLimitError& e) {
    message = script_where(L) + e.what();
  }
  before_error(L);
  lua_pushlstring(L, message.data(), message.size());
  message = std::string();
  lua_error(L);
}

}  // namespace perfsim::dsl
