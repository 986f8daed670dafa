// Placeholder until the CUDA backend's graph runner lands.
#include <memory>

#include "backends/cuda/cuda_device.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

std::unique_ptr<Backend> make_cuda_backend() {
  throw NotExecutable("cuda backend: graph execution is not available in this build yet");
}

}  // namespace perfsim::cuda
