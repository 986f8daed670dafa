// Lookups in the Lua catalogs (stdlib/hardware.lua, stdlib/models.lua or their overrides on
// the module path): by name or alias, ignoring case, with "did you mean" on a miss.
#pragma once
#include <lua.hpp>

#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/config/model.hpp"

namespace perfsim::dsl {

// Names of the entries of a catalog module ("hardware" or "models"), in catalog order.
[[nodiscard]] std::vector<std::string> catalog_names(lua_State* L, const char* module);

// Throw ConfigError "unknown hardware 'x' (did you mean 'y'?); known: ..." on a miss.
[[nodiscard]] Hardware lookup_hardware(lua_State* L, const std::string& name);
[[nodiscard]] ModelConfig lookup_model(lua_State* L, const std::string& name);

[[nodiscard]] std::vector<Hardware> all_hardware(lua_State* L);
[[nodiscard]] std::vector<ModelConfig> all_models(lua_State* L);

}  // namespace perfsim::dsl
