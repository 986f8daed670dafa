// Reading named fields of a Lua table with type checks, rejecting unknown fields with a
// "did you mean". Errors are ConfigError; API functions add the script location.
#pragma once
#include <lua.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace perfsim::dsl {

// Positive stack index for `index` (Lua 5.1 has no lua_absindex).
[[nodiscard]] int abs_index(lua_State* L, int index);
// How a value reads in an error message: "string 'abc'", "number 1.5", "a table".
[[nodiscard]] std::string describe_value(lua_State* L, int index);
// Shortest text for a number: integers without a decimal point.
[[nodiscard]] std::string format_number(double v);
// Reads a Lua value as a whole number; throws ConfigError naming `what` otherwise.
[[nodiscard]] int64_t to_integer(lua_State* L, int index, const std::string& what);
// Keys of the table at `index` that are strings, sorted.
[[nodiscard]] std::vector<std::string> string_keys(lua_State* L, int index);
// Length of the array part (#t).
[[nodiscard]] int array_length(lua_State* L, int index);

class FieldReader {
 public:
  // `what` names the table in messages ("decode{}"); `known` lists the accepted fields.
  FieldReader(lua_State* L, int index, std::string what, std::vector<std::string> known);

  [[nodiscard]] bool has(const char* key) const;
  [[nodiscard]] std::optional<double> number(const char* key) const;
  [[nodiscard]] std::optional<int64_t> integer(const char* key) const;
  [[nodiscard]] std::optional<bool> boolean(const char* key) const;
  [[nodiscard]] std::optional<std::string> string(const char* key) const;
  // Pushes the field (nil when absent) and returns its type.
  int push(const char* key) const;
  [[nodiscard]] const std::string& what() const { return m_what; }
  [[nodiscard]] int index() const { return m_index; }

  template <typename T>
  void read(const char* key, T& out) const;

 private:
  [[noreturn]] void type_error(const char* key, const char* expected) const;
  lua_State* m_L;
  int m_index;
  std::string m_what;
};

template <>
inline void FieldReader::read<int64_t>(const char* key, int64_t& out) const {
  if (auto v = integer(key)) out = *v;
}
// An int field (GPU counts, SMs, degrees) refuses a whole number that would wrap (lua_fields.cpp).
template <>
void FieldReader::read<int>(const char* key, int& out) const;
template <>
inline void FieldReader::read<double>(const char* key, double& out) const {
  if (auto v = number(key)) out = *v;
}
template <>
inline void FieldReader::read<bool>(const char* key, bool& out) const {
  if (auto v = boolean(key)) out = *v;
}
template <>
inline void FieldReader::read<std::string>(const char* key, std::string& out) const {
  if (auto v = string(key)) out = *v;
}

// Writers for the table on top of the stack: t[key] = v.
inline void set_number(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}
inline void set_string(lua_State* L, const char* key, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, key);
}
inline void set_bool(lua_State* L, const char* key, bool v) {
  lua_pushboolean(L, v ? 1 : 0);
  lua_setfield(L, -2, key);
}

// The scalar fields of a struct, each bound to its Lua key once: read from a table and written
// to one through the same list, so a field cannot be read under one key and written under
// another. Fields that need a choice, a check or a nested table are read around it.
template <class S>
class ScalarFields {
 public:
  using Member = std::variant<std::string S::*, double S::*, int64_t S::*, int S::*, bool S::*>;
  struct Field {
    const char* key;
    Member member;
  };
  ScalarFields(std::initializer_list<Field> fields) : m_fields(fields) {}

  // Every field the table holds, in order, into `s`; absent fields leave `s` as it is.
  void read(const FieldReader& r, S& s) const {
    for (const Field& f : m_fields)
      std::visit([&](auto member) { r.read(f.key, s.*member); }, f.member);
  }
  // t[key] = s.member for every field, into the table on top of the stack.
  void push(lua_State* L, const S& s) const {
    for (const Field& f : m_fields) std::visit([&](auto member) { push_value(L, f.key, s.*member); }, f.member);
  }
  // The keys, in order.
  [[nodiscard]] std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const Field& f : m_fields) out.emplace_back(f.key);
    return out;
  }

 private:
  static void push_value(lua_State* L, const char* key, const std::string& v) { set_string(L, key, v); }
  static void push_value(lua_State* L, const char* key, bool v) { set_bool(L, key, v); }
  template <class N>
  static void push_value(lua_State* L, const char* key, N v) {
    set_number(L, key, static_cast<double>(v));
  }
  std::vector<Field> m_fields;
};

}  // namespace perfsim::dsl
