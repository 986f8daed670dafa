// Lua tables <-> Calibration: the gemm, kernels, collectives and measured fields of a
// hardware table (a calibrated profile). docs/CALIBRATION.md describes the format.
#pragma once
#include <lua.hpp>

#include <string>

#include "core/cost/calibration.hpp"

namespace perfsim::dsl {

// Reads those of the four fields present in the hardware table at `index` into `cal`
// (a table present replaces the matching entries); throws ConfigError naming the field.
void read_calibration_fields(lua_State* L, int index, Calibration& cal, const std::string& what);
// Sets the four fields on the table on top of the stack.
void push_calibration_fields(lua_State* L, const Calibration& cal);

}  // namespace perfsim::dsl
