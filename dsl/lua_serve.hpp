// serve{...} and its parts (poisson{}, gamma{}, ramp{}, closed{}, trace "file", lengths{}) <->
// ServeSpec. Files a serve{} names (traces, length lists) are read relative to the script.
#pragma once
#include <lua.hpp>

#include <string>

#include "core/config/serve.hpp"

namespace perfsim::dsl {

// Reads the serve table at `index` (fields: requests, seed, arrivals, prompt, output, prefix,
// slo); `dir` resolves relative file names. Throws ConfigError naming the field.
[[nodiscard]] ServeSpec to_serve(lua_State* L, int index, const std::string& what, const std::string& dir);

// serve{...}: checks the table and returns it marked phase = "serve" with the call's place.
int api_serve(lua_State* L);

}  // namespace perfsim::dsl
