// The perfsim version printed by --version and recorded in reports (matches project() in CMake).
#pragma once

namespace perfsim {

inline constexpr const char* perfsim_version = "0.1.0";

}  // namespace perfsim
