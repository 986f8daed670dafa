// perfsim.capacity{...}: capacity planning (core/serve/capacity.hpp) from a script.
#pragma once
#include <lua.hpp>

namespace perfsim::dsl {

// perfsim.capacity{scenario = s, target_rate = 500} or {scenario = s, users = 1000}
int api_capacity(lua_State* L);

}  // namespace perfsim::dsl
