// Image models in Lua: model{kind = "cnn", ...} tables and the zoo's ResNets read into a
// CnnConfig (core/config/cnn.hpp), and pushed back as tables.
#pragma once
#include <string>

#include "core/config/model.hpp"
#include <lua.hpp>

namespace perfsim::dsl {

// Whether the table at `index` says kind = "cnn" (any other kind but "transformer" is an error
// naming the kinds).
[[nodiscard]] bool is_cnn_table(lua_State* L, int index, const std::string& what);
// The fields of a CNN table over `m` (a zoo entry's, or the defaults): name, image,
// in_channels, stem_width, stages (a list of {blocks, width, stride}), bottleneck, classes.
// Throws ConfigError naming the field.
void read_cnn_fields(lua_State* L, int index, CnnConfig& m, const std::string& what);
// A model table as Lua sees it: kind = "cnn", its fields, and params.
void push_cnn_model(lua_State* L, const CnnConfig& m);

}  // namespace perfsim::dsl
