// The script function profile() and the list of profiles a script can name.
#pragma once
#include <lua.hpp>

#include <string>
#include <vector>

#include "dsl/dsl.hpp"

namespace perfsim::dsl {

// profile "name" | profile "path/file.lua" | profile { base = "H100-SXM", ... }: pushes a
// hardware table. Registered as a global by install_api.
int api_profile(lua_State* L);
// Profile files on the search path (in its order), then the stdlib's embedded ones.
[[nodiscard]] std::vector<ProfileSource> profile_sources(lua_State* L);
// Names of the profiles on the search path and in the stdlib, sorted, each once.
[[nodiscard]] std::vector<std::string> profile_names(lua_State* L);

}  // namespace perfsim::dsl
