// Which kernels this build runs: a fingerprint of each backend's kernel sources (12 hex digits
// of a SHA-256, scripts/kernel_fingerprint.cmake). `perfsim calibrate` records it in the profile
// it writes; a run priced from a profile whose kernels differ from today's says so, since the
// fitted efficiencies then describe other kernels.
#pragma once
#include <string_view>

namespace perfsim {

// The fingerprint of backend "cpu" or "cuda" in this build; "" for any other name.
[[nodiscard]] std::string_view kernel_fingerprint(std::string_view backend);

}  // namespace perfsim
