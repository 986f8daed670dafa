// Typed access to named fields of Lua tables, with messages that say which table, which
// field, what was expected and what was given.
#include "dsl/lua_fields.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/errors.hpp"
#include "core/text.hpp"

namespace perfsim::dsl {

int abs_index(lua_State* L, int index) {
  return index > 0 || index <= LUA_REGISTRYINDEX ? index : lua_gettop(L) + index + 1;
}

std::string format_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:g}", v);
}

std::string describe_value(lua_State* L, int index) {
  switch (lua_type(L, index)) {
    case LUA_TNIL: return "nil";
    case LUA_TNUMBER: return "number " + format_number(lua_tonumber(L, index));
    case LUA_TSTRING: return fmt::format("string '{}'", lua_tostring(L, index));
    case LUA_TBOOLEAN: return lua_toboolean(L, index) ? "true" : "false";
    default: return fmt::format("a {}", lua_typename(L, lua_type(L, index)));
  }
}

int64_t to_integer(lua_State* L, int index, const std::string& what) {
  if (lua_type(L, index) != LUA_TNUMBER)
    throw ConfigError(fmt::format("{} must be a number (got {})", what, describe_value(L, index)));
  const double v = lua_tonumber(L, index);
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.0e15)
    throw ConfigError(fmt::format("{} must be a whole number (got {})", what, format_number(v)));
  return static_cast<int64_t>(v);
}

std::vector<std::string> string_keys(lua_State* L, int index) {
  index = abs_index(L, index);
  std::vector<std::string> keys;
  lua_pushnil(L);
  while (lua_next(L, index) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) keys.emplace_back(lua_tostring(L, -1));
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

int array_length(lua_State* L, int index) { return static_cast<int>(lua_objlen(L, index)); }

FieldReader::FieldReader(lua_State* L, int index, std::string what, std::vector<std::string> known)
    : m_L(L), m_index(abs_index(L, index)), m_what(std::move(what)) {
  if (!lua_istable(L, m_index))
    throw ConfigError(fmt::format("{} expects a table of named fields (got {})", m_what,
                                  describe_value(L, m_index)));
  lua_pushnil(L);
  while (lua_next(L, m_index) != 0) {
    lua_pop(L, 1);  // the value; the key stays for lua_next
    if (lua_type(L, -1) != LUA_TSTRING) {
      const std::string key = describe_value(L, -1);
      lua_pop(L, 1);
      throw ConfigError(fmt::format("{} takes named fields only (got a value at key {})", m_what, key));
    }
    const std::string key = lua_tostring(L, -1);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      lua_pop(L, 1);
      const std::string hint = did_you_mean(key, known);
      std::string msg = fmt::format("unknown field '{}' in {}{}", key, m_what, hint);
      if (hint.empty()) msg += fmt::format("; fields: {}", fmt::join(known, ", "));
      throw ConfigError(msg);
    }
  }
}

int FieldReader::push(const char* key) const {
  lua_pushstring(m_L, key);
  lua_rawget(m_L, m_index);
  return lua_type(m_L, -1);
}

bool FieldReader::has(const char* key) const {
  const bool present = push(key) != LUA_TNIL;
  lua_pop(m_L, 1);
  return present;
}

void FieldReader::type_error(const char* key, const char* expected) const {
  const std::string got = describe_value(m_L, -1);
  lua_pop(m_L, 1);
  throw ConfigError(fmt::format("{}: field '{}' must be {} (got {})", m_what, key, expected, got));
}

std::optional<double> FieldReader::number(const char* key) const {
  const int t = push(key);
  if (t == LUA_TNIL) {
    lua_pop(m_L, 1);
    return std::nullopt;
  }
  if (t != LUA_TNUMBER) type_error(key, "a number");
  const double v = lua_tonumber(m_L, -1);
  lua_pop(m_L, 1);
  return v;
}

std::optional<int64_t> FieldReader::integer(const char* key) const {
  const int t = push(key);
  if (t == LUA_TNIL) {
    lua_pop(m_L, 1);
    return std::nullopt;
  }
  if (t != LUA_TNUMBER) type_error(key, "a whole number");
  const double v = lua_tonumber(m_L, -1);
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.0e15) type_error(key, "a whole number");
  lua_pop(m_L, 1);
  return static_cast<int64_t>(v);
}

template <>
void FieldReader::read<int>(const char* key, int& out) const {
  const std::optional<int64_t> v = integer(key);
  if (!v) return;
  if (*v > std::numeric_limits<int>::max() || *v < std::numeric_limits<int>::min())
    throw ConfigError(fmt::format("{}: field '{}' = {} is beyond {}; give a smaller whole number", m_what, key, *v,
                                  std::numeric_limits<int>::max()));
  out = static_cast<int>(*v);
}

std::optional<bool> FieldReader::boolean(const char* key) const {
  const int t = push(key);
  if (t == LUA_TNIL) {
    lua_pop(m_L, 1);
    return std::nullopt;
  }
  if (t != LUA_TBOOLEAN) type_error(key, "true or false");
  const bool v = lua_toboolean(m_L, -1) != 0;
  lua_pop(m_L, 1);
  return v;
}

std::optional<std::string> FieldReader::string(const char* key) const {
  const int t = push(key);
  if (t == LUA_TNIL) {
    lua_pop(m_L, 1);
    return std::nullopt;
  }
  if (t != LUA_TSTRING) type_error(key, "a string");
  std::string v = lua_tostring(m_L, -1);
  lua_pop(m_L, 1);
  return v;
}

}  // namespace perfsim::dsl
