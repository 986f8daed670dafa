// The perfsim version: `perfsim --version` prints it and scripts read it as perfsim.version
// (matches project() in CMake).
#pragma once

namespace perfsim {

inline constexpr const char* perfsim_version = "0.1.0";

}  // namespace perfsim
