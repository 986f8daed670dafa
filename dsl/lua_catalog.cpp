// Catalog lookups: a catalog module returns a list of entry tables, each with a `name` and
// optional `aliases`; entries convert to Hardware / ModelConfig through lua_convert.
#include "dsl/lua_catalog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/text.hpp"
#include "dsl/lua_convert.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace {

struct EntryName {
  std::string name;
  std::vector<std::string> aliases;
};

// Pushes the module's list of entries.
void push_catalog(lua_State* L, const char* module) {
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  pcall_or_throw(L, 1, 1);
  if (!lua_istable(L, -1)) {
    const std::string got = describe_value(L, -1);
    lua_pop(L, 1);
    throw ConfigError(fmt::format("module '{}' must return a list of entries (got {})", module, got));
  }
}

// Names and aliases of the list at `list`, validating the shape of each entry.
std::vector<EntryName> entry_names(lua_State* L, int list, const char* module) {
  std::vector<EntryName> out;
  for (int i = 1; i <= array_length(L, list); ++i) {
    lua_rawgeti(L, list, i);
    if (!lua_istable(L, -1))
      throw ConfigError(fmt::format("module '{}': entry {} must be a table", module, i));
    EntryName e;
    lua_getfield(L, -1, "name");
    if (lua_type(L, -1) != LUA_TSTRING)
      throw ConfigError(fmt::format("module '{}': entry {} has no name", module, i));
    e.name = lua_tostring(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, -1, "aliases");
    if (lua_istable(L, -1)) {
      for (int j = 1; j <= array_length(L, -1); ++j) {
        lua_rawgeti(L, -1, j);
        if (lua_type(L, -1) == LUA_TSTRING) e.aliases.emplace_back(lua_tostring(L, -1));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 2);
    out.push_back(std::move(e));
  }
  return out;
}

// Pushes the entry named `name` (or one of its aliases), ignoring case; throws on a miss.
void push_entry(lua_State* L, const char* module, const char* kind, const std::string& name) {
  push_catalog(L, module);
  const int list = lua_gettop(L);
  const std::vector<EntryName> entries = entry_names(L, list, module);
  const std::string key = to_lower(name);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    bool match = to_lower(entries[i].name) == key;
    for (const auto& a : entries[i].aliases) match = match || to_lower(a) == key;
    if (!match) continue;
    lua_rawgeti(L, list, static_cast<int>(i) + 1);
    lua_remove(L, list);
    return;
  }
  lua_pop(L, 1);
  std::vector<std::string> names, candidates;
  for (const auto& e : entries) {
    names.push_back(e.name);
    candidates.push_back(e.name);
    candidates.insert(candidates.end(), e.aliases.begin(), e.aliases.end());
  }
  throw ConfigError(fmt::format("unknown {} '{}'{}; known: {}", kind, name,
                                did_you_mean(name, candidates), fmt::join(names, ", ")));
}

}  // namespace

std::vector<std::string> catalog_names(lua_State* L, const char* module) {
  const StackRestore restore(L);
  push_catalog(L, module);
  std::vector<std::string> out;
  for (const auto& e : entry_names(L, lua_gettop(L), module)) out.push_back(e.name);
  return out;
}

Hardware lookup_hardware(lua_State* L, const std::string& name) {
  const StackRestore restore(L);
  push_entry(L, "hardware", "hardware", name);
  return to_hardware(L, -1, fmt::format("hardware '{}'", name));
}

ModelConfig lookup_model(lua_State* L, const std::string& name) {
  const StackRestore restore(L);
  push_entry(L, "models", "model", name);
  return to_model(L, -1, fmt::format("model '{}'", name));
}

std::vector<Hardware> all_hardware(lua_State* L) {
  const StackRestore restore(L);
  push_catalog(L, "hardware");
  const int list = lua_gettop(L);
  std::vector<Hardware> out;
  for (const auto& e : entry_names(L, list, "hardware")) {
    lua_rawgeti(L, list, static_cast<int>(out.size()) + 1);
    out.push_back(to_hardware(L, -1, fmt::format("hardware '{}'", e.name)));
    lua_pop(L, 1);
  }
  return out;
}

std::vector<ModelConfig> all_models(lua_State* L) {
  const StackRestore restore(L);
  push_catalog(L, "models");
  const int list = lua_gettop(L);
  std::vector<ModelConfig> out;
  for (const auto& e : entry_names(L, list, "models")) {
    lua_rawgeti(L, list, static_cast<int>(out.size()) + 1);
    out.push_back(to_model(L, -1, fmt::format("model '{}'", e.name)));
    lua_pop(L, 1);
  }
  return out;
}

}  // namespace perfsim::dsl
