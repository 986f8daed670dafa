// The script function profile(): `profile "h100-local"` loads a calibrated profile by name
// (profiles/<name>.lua on the module path, $PERFSIM_PATH, the script's directory, then the
// stdlib) or by file path; `profile { base = "H100-SXM", ... }` is what a profile file
// returns: the catalog entry `base` refined by the fitted fields.
#include "dsl/lua_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/cost/transfer.hpp"
#include "core/errors.hpp"
#include "core/text.hpp"
#include "dsl/lua_catalog.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_sandbox.hpp"
#include "dsl/lua_state.hpp"
#include "dsl/stdlib_files.hpp"

namespace perfsim::dsl {

namespace {

constexpr std::string_view embedded_prefix = "profiles.";

bool is_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 4 && s.compare(s.size() - 4, 4, ".lua") == 0);
}

// Runs the chunk on top of the stack and leaves the hardware table it returns, normalized
// through to_hardware so every field is checked.
void run_profile_chunk(lua_State* L, const std::string& where) {
  pcall_or_throw(L, 0, 1);
  if (!lua_istable(L, -1))
    throw ConfigError(fmt::format("{} must return a profile table (`return profile {{ ... }}`), got {}",
                                  where, describe_value(L, -1)));
  const Hardware hw = to_hardware(L, -1, where);
  lua_pop(L, 1);
  push_hardware(L, hw);
}

void load_by_path(lua_State* L, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw ConfigError(fmt::format("profile file '{}' not found (give a path to a file written by "
                                  "`perfsim calibrate -o`, or a profile name: {})",
                                  path, fmt::join(profile_names(L), ", ")));
  // The sandbox's places when a script names it; a regular file of bounded size; text.
  const std::string text = read_script_file(L, path, "profile");
  if (load_text_chunk(L, text, "@" + path) != 0) {
    const char* msg = lua_tostring(L, -1);
    throw ConfigError(msg != nullptr ? msg : path + ": cannot be loaded");
  }
  // `return profile {...}` is a tail call: an error in a field has no line of the file, so
  // it is prefixed with the file here.
  auto named = [&](const std::string& msg) { return msg.find(path) == std::string::npos ? path + ": " + msg : msg; };
  try {
    run_profile_chunk(L, path);
  } catch (const LuaError& e) {
    throw LuaError(named(e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(named(e.what()));
  }
}

void load_by_name(lua_State* L, const std::string& name) {
  for (const std::string& dir : module_search_dirs(L)) {
    const std::string candidate = dir + "/profiles/" + name + ".lua";
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return load_by_path(L, candidate);
  }
  for (const EmbeddedFile& f : stdlib_files()) {
    if (f.name != std::string(embedded_prefix) + name) continue;
    const std::string chunk = "=stdlib/profiles/" + name + ".lua";
    if (luaL_loadbufferx(L, f.source.data(), f.source.size(), chunk.c_str(), "t") != 0)
      throw ConfigError(lua_tostring(L, -1));
    return run_profile_chunk(L, "stdlib/profiles/" + name + ".lua");
  }
  const std::vector<std::string> known = profile_names(L);
  throw ConfigError(fmt::format("unknown profile '{}'{}; known: {} (or give a file path; "
                                "`perfsim calibrate -o FILE` writes one)",
                                name, did_you_mean(name, known),
                                known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
}

// profile { base = "H100-SXM", ... }: the catalog entry refined by the table's fields.
void build_profile(lua_State* L, int index) {
  const FieldReader r(L, index, "profile{}", hardware_fields());
  const std::optional<std::string> base = r.string("base");
  if (!base)
    throw ConfigError(
        "profile{}: missing field 'base' (the catalog entry the profile refines, e.g. "
        "base = \"H100-SXM\"; see `perfsim list hardware`)");
  Hardware hw = lookup_hardware(L, *base);
  hw.calibrated = true;
  read_hardware_fields(L, index, hw, "profile{}");
  hw.base = *base;
  if (!r.has("name"))
    throw ConfigError("profile{}: missing field 'name' (how reports call this profile)");
  push_hardware(L, hw);
}

}  // namespace

std::vector<ProfileSource> profile_sources(lua_State* L) {
  std::vector<ProfileSource> out;
  for (const std::string& dir : module_search_dirs(L)) {
    std::vector<ProfileSource> here;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/profiles", ec))
      if (e.path().extension() == ".lua" && e.is_regular_file(ec))
        here.push_back({e.path().stem().string(), e.path().string()});
    std::sort(here.begin(), here.end(), [](const ProfileSource& a, const ProfileSource& b) { return a.path < b.path; });
    out.insert(out.end(), here.begin(), here.end());
  }
  for (const EmbeddedFile& f : stdlib_files())
    if (f.name.substr(0, embedded_prefix.size()) == embedded_prefix)
      out.push_back({std::string(f.name.substr(embedded_prefix.size())), ""});
  return out;
}

std::vector<std::string> profile_names(lua_State* L) {
  std::vector<std::string> names;
  for (ProfileSource& s : profile_sources(L)) names.push_back(std::move(s.name));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

int api_profile(lua_State* L) {
  if (lua_type(L, 1) == LUA_TSTRING) {
    const std::string arg = lua_tostring(L, 1);
    // "h100-local@H200": a calibrated profile carried to another catalog entry
    // (core/cost/transfer.hpp). A file whose name holds '@' stays a file.
    const auto at = arg.rfind('@');
    std::error_code ec;
    if (at != std::string::npos && at > 0 && at + 1 < arg.size() && !std::filesystem::exists(arg, ec)) {
      const std::string from_spec = arg.substr(0, at);
      if (is_path(from_spec))
        load_by_path(L, from_spec);
      else
        load_by_name(L, from_spec);
      const Hardware from = to_hardware(L, -1, "profile '" + from_spec + "'");
      lua_pop(L, 1);
      push_hardware(L, transfer_profile(from, lookup_hardware(L, arg.substr(at + 1))));
      return 1;
    }
    if (is_path(arg))
      load_by_path(L, arg);
    else
      load_by_name(L, arg);
    return 1;
  }
  if (lua_istable(L, 1)) {
    build_profile(L, 1);
    return 1;
  }
  throw ConfigError(fmt::format(
      "profile() expects a profile name such as \"h100-local\", a file path, or a table "
      "{{base = \"H100-SXM\", ...}} (got {})",
      describe_value(L, 1)));
}

}  // namespace perfsim::dsl
