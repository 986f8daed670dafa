// The functions scripts see: constructors (scenario, prefill, decode, train, model, hardware,
// options) and the perfsim table. Each lives in the file named after what it builds.
#pragma once
#include <lua.hpp>

namespace perfsim::dsl {

// Registers the globals and the perfsim table in a fresh state (before the prelude runs).
void install_api(lua_State* L);

// scenario{...} (lua_scenario.cpp)
int api_scenario(lua_State* L);
// options{...} (lua_options.cpp)
int api_options(lua_State* L);
// perfsim.predict{...} and perfsim.measure{...} (lua_run.cpp)
int api_predict(lua_State* L);
int api_measure(lua_State* L);
// perfsim.search{...} (lua_search.cpp)
int api_search(lua_State* L);

}  // namespace perfsim::dsl
