// options{ name = {description, default} }: declares a script's options. Values come from the
// defaults, overridden by --set NAME=VALUE converted to the default's type. With
// DslSettings::options_only the script stops right here (for `perfsim run x.lua --help`).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/errors.hpp"
#include "core/text.hpp"
#include "dsl/lua_api.hpp"
#include "dsl/lua_fields.hpp"
#include "dsl/lua_state.hpp"

namespace perfsim::dsl {

namespace {

// Pushes the override text converted to the option's type.
void push_override(lua_State* L, const ScriptOption& o, const std::string& text) {
  const std::string hint = fmt::format("; set it like --set {}=", o.name);
  if (o.type == "number") {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    // strtod also reads "inf", "nan" and hex; no option means a non-finite value.
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
      throw ConfigError(fmt::format("option '{}' expects a number (got '{}'){}{}", o.name, text,
                                    hint, o.default_value));
    lua_pushnumber(L, v);
  } else if (o.type == "boolean") {
    const std::string t = to_lower(text);
    if (t == "true" || t == "1" || t == "yes" || t == "on")
      lua_pushboolean(L, 1);
    else if (t == "false" || t == "0" || t == "no" || t == "off")
      lua_pushboolean(L, 0);
    else
      throw ConfigError(fmt::format("option '{}' expects a boolean: true or false (got '{}')",
                                    o.name, text));
  } else {
    lua_pushlstring(L, text.data(), text.size());
  }
}

// Reads one declaration {description, default} (or {description = ..., default = ...}) and
// pushes its default.
ScriptOption read_declaration(lua_State* L, int spec, const std::string& name) {
  if (!lua_istable(L, spec))
    throw ConfigError(fmt::format(
        "option '{}' must be declared as {{\"description\", default}} (got {})", name,
        describe_value(L, spec)));
  ScriptOption o;
  o.name = name;
  lua_rawgeti(L, spec, 1);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_getfield(L, spec, "description");
  }
  if (lua_type(L, -1) != LUA_TSTRING)
    throw ConfigError(fmt::format("option '{}': the description (first entry) must be a string (got {})",
                                  name, describe_value(L, -1)));
  o.description = lua_tostring(L, -1);
  lua_pop(L, 1);
  lua_rawgeti(L, spec, 2);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_getfield(L, spec, "default");
  }
  switch (lua_type(L, -1)) {
    case LUA_TNUMBER:
      o.type = "number";
      o.default_value = format_number(lua_tonumber(L, -1));
      break;
    case LUA_TSTRING:
      o.type = "string";
      o.default_value = lua_tostring(L, -1);
      break;
    case LUA_TBOOLEAN:
      o.type = "boolean";
      o.default_value = lua_toboolean(L, -1) ? "true" : "false";
      break;
    default:
      throw ConfigError(fmt::format(
          "option '{}': the default (second entry) must be a number, string or boolean (got {}); "
          "its type is the option's type",
          name, describe_value(L, -1)));
  }
  return o;  // the default stays pushed
}

// __index of the table options{} returns: reading an undeclared option is a typo.
int option_index(lua_State* L) {
  const std::string key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : describe_value(L, 2);
  const std::vector<std::string> declared = string_keys(L, 1);
  throw ConfigError(fmt::format("unknown option '{}'{}; declared: {}", key,
                                did_you_mean(key, declared), fmt::join(declared, ", ")));
}

}  // namespace

int api_options(lua_State* L) {
  ScriptContext& ctx = context(L);
  if (!lua_istable(L, 1))
    throw ConfigError(fmt::format(
        "options{{}} expects a table: options {{ batch = {{\"sequences decoded together\", 1}} }} (got {})",
        describe_value(L, 1)));
  lua_pushnil(L);
  while (lua_next(L, 1) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      throw ConfigError(fmt::format("options{{}}: option names must be strings (got {})",
                                    describe_value(L, -1)));
  }
  lua_newtable(L);
  const int values = lua_gettop(L);
  for (const std::string& name : string_keys(L, 1)) {
    for (const ScriptOption& o : ctx.options)
      if (o.name == name) throw ConfigError(fmt::format("option '{}' is declared twice", name));
    lua_getfield(L, 1, name.c_str());
    const ScriptOption o = read_declaration(L, lua_gettop(L), name);
    // The last --set of a name wins, as on most command lines.
    const std::string* text = nullptr;
    for (const auto& [key, value] : ctx.settings.overrides)
      if (key == name) text = &value;
    if (text != nullptr) {
      lua_pop(L, 1);
      push_override(L, o, *text);
    }
    lua_setfield(L, values, name.c_str());
    lua_pop(L, 1);  // the declaration
    ctx.options.push_back(o);
  }
  ctx.options_declared = true;
  if (ctx.settings.options_only) throw StopScript{};
  lua_newtable(L);
  lua_pushcfunction(L, guarded<option_index>);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, values);
  lua_settop(L, values);
  return 1;
}

}  // namespace perfsim::dsl
