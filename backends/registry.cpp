// Backend registry: creates backends by name; CUDA exists only when this binary was built
// with it (PERFSIM_HAVE_CUDA) and is chosen by "auto" only when a GPU is present.
#include "backends/registry.hpp"

#include <fmt/format.h>

#include "backends/cpu/cpu_backend.hpp"
#include "core/errors.hpp"
#include "core/text.hpp"

namespace perfsim {

#ifdef PERFSIM_HAVE_CUDA
// What the CUDA backend (backends/cuda, built only with a CUDA toolkit) provides the registry.
namespace cuda {
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend();
[[nodiscard]] bool gpu_present();  // a usable GPU is visible to the runtime
}  // namespace cuda
#endif

std::vector<std::string> compiled_backends() {
  std::vector<std::string> names{"cpu"};
#ifdef PERFSIM_HAVE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

std::unique_ptr<Backend> make_backend(std::string_view name) {
  const std::string key = to_lower(name);
  if (key == "cpu") return std::make_unique<cpu::CpuBackend>();
#ifdef PERFSIM_HAVE_CUDA
  if (key == "cuda") return cuda::make_cuda_backend();
  if (key == "auto") {
    if (cuda::gpu_present()) return cuda::make_cuda_backend();
    return std::make_unique<cpu::CpuBackend>();
  }
#else
  if (key == "auto") return std::make_unique<cpu::CpuBackend>();
  if (key == "cuda")
    throw ConfigError(fmt::format("this perfsim was built without CUDA (backends: {})",
                                  fmt::join(compiled_backends(), ", ")));
#endif
  std::vector<std::string> known = compiled_backends();
  known.push_back("auto");
  throw ConfigError(fmt::format("unknown backend '{}'{}; available: {}", name,
                                did_you_mean(name, known), fmt::join(known, ", ")));
}

}  // namespace perfsim
