// model{kind = "cnn", ...} (lua_cnn_model.hpp).
#include "dsl/lua_cnn_model.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "dsl/lua_fields.hpp"

namespace perfsim::dsl {

namespace {

const std::vector<std::string>& cnn_fields() {
  static const std::vector<std::string> f = {"kind",       "name",       "image",   "in_channels", "stem_width",
                                             "stages",     "bottleneck", "classes", "aliases"};
  return f;
}

// stages[i] = {blocks, width, stride} or {blocks = , width = , stride = } (stride 1 if left out).
CnnStage read_stage(lua_State* L, int index, const std::string& what) {
  index = abs_index(L, index);
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format("{} must be {{blocks, width, stride}} (got {})", what, describe_value(L, index)));
  CnnStage s;
  auto field = [&](int position, const char* key, int64_t& out, bool required) {
    lua_rawgeti(L, index, position);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_getfield(L, index, key);
    }
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      if (required) throw ConfigError(fmt::format("{}: missing {} ({{blocks, width, stride}})", what, key));
      return;
    }
    if (!lua_isnumber(L, -1) || lua_tonumber(L, -1) != static_cast<double>(static_cast<int64_t>(lua_tonumber(L, -1)))) {
      const std::string got = describe_value(L, -1);
      lua_pop(L, 1);
      throw ConfigError(fmt::format("{}.{} must be a whole number (got {})", what, key, got));
    }
    out = static_cast<int64_t>(lua_tonumber(L, -1));
    lua_pop(L, 1);
  };
  field(1, "blocks", s.blocks, true);
  field(2, "width", s.width, true);
  field(3, "stride", s.stride, false);
  return s;
}

}  // namespace

bool is_cnn_table(lua_State* L, int index, const std::string& what) {
  index = abs_index(L, index);
  lua_getfield(L, index, "kind");
  const bool absent = lua_isnil(L, -1);
  const std::string kind = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : describe_value(L, -1);
  lua_pop(L, 1);
  if (absent || kind == "transformer") return false;
  if (kind == "cnn") return true;
  throw ConfigError(fmt::format("{}: kind must be \"transformer\" (the default) or \"cnn\" (got {})", what, kind));
}

void read_cnn_fields(lua_State* L, int index, CnnConfig& m, const std::string& what) {
  index = abs_index(L, index);
  const FieldReader r(L, index, what, cnn_fields());
  if (auto v = r.string("name")) m.name = *v;
  r.read("image", m.image);
  r.read("in_channels", m.in_channels);
  r.read("stem_width", m.stem_width);
  r.read("bottleneck", m.bottleneck);
  r.read("classes", m.classes);
  if (r.push("stages") != LUA_TNIL) {
    if (!lua_istable(L, -1)) {
      const std::string got = describe_value(L, -1);
      lua_pop(L, 1);
      throw ConfigError(fmt::format("{}: stages must be a list of {{blocks, width, stride}} (got {})", what, got));
    }
    m.stages.clear();
    const int list = lua_gettop(L);
    const auto n = static_cast<int>(lua_objlen(L, list));
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L, list, i);
      m.stages.push_back(read_stage(L, -1, fmt::format("{}: stages[{}]", what, i)));
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

void push_cnn_model(lua_State* L, const CnnConfig& m) {
  lua_createtable(L, 0, 8);
  set_string(L, "kind", "cnn");
  set_string(L, "name", m.name);
  set_number(L, "image", static_cast<double>(m.image));
  set_number(L, "in_channels", static_cast<double>(m.in_channels));
  set_number(L, "stem_width", static_cast<double>(m.stem_width));
  set_bool(L, "bottleneck", m.bottleneck);
  set_number(L, "classes", static_cast<double>(m.classes));
  lua_createtable(L, static_cast<int>(m.stages.size()), 0);
  for (std::size_t i = 0; i < m.stages.size(); ++i) {
    lua_createtable(L, 3, 0);
    for (int k = 0; k < 3; ++k) {
      const int64_t v = k == 0 ? m.stages[i].blocks : k == 1 ? m.stages[i].width : m.stages[i].stride;
      lua_pushnumber(L, static_cast<double>(v));
      lua_rawseti(L, -2, k + 1);
    }
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  lua_setfield(L, -2, "stages");
}

}  // namespace perfsim::dsl
