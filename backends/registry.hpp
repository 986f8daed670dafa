// Creates backends by name. CUDA is present only when the binary was built with it.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/run/backend.hpp"

namespace perfsim {

// "cpu", "cuda", or "auto" (cuda when built and a GPU is present, else cpu).
// Throws ConfigError for unknown or unavailable names, with a suggestion.
[[nodiscard]] std::unique_ptr<Backend> make_backend(std::string_view name);
// Backends compiled into this binary.
[[nodiscard]] std::vector<std::string> compiled_backends();

}  // namespace perfsim
