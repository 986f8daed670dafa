// The script function profile() and the list of profiles a script can name.
#pragma once
#include <lua.hpp>

#include <string>
#include <vector>

namespace perfsim::dsl {

// profile "name" | profile "path/file.lua" | profile { base = "H100-SXM", ... }: pushes a
// hardware table. Registered as a global by install_api.
int api_profile(lua_State* L);
// Names of the profiles on the search path and in the stdlib, sorted.
[[nodiscard]] std::vector<std::string> profile_names(lua_State* L);

}  // namespace perfsim::dsl
