// Entry point of the GPU tests: skips (exit 77, "skipped" in ctest) when no GPU is visible.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "backends/cuda/cuda_device.hpp"

int main(int argc, char** argv) {
  if (!perfsim::cuda::gpu_present()) {
    std::puts("perfsim_gpu_tests: no CUDA device visible: GPU tests skipped");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
