#include <doctest/doctest.h>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"

using namespace perfsim::cuda;

TEST_CASE("cuda device properties come from the device") {
  const auto d = query_device(0);
  CHECK(d.backend == "cuda");
  CHECK(!d.name.empty());
  CHECK(d.compute_units > 0);
  CHECK(d.memory_bytes > 1e9);
  CHECK(d.l2_bytes > 0);
}

TEST_CASE("a failing CUDA call names the call and file:line") {
  void* p = nullptr;
  // More than any GPU holds: fails with cudaErrorMemoryAllocation.
  CHECK_THROWS_WITH_AS(PERFSIM_CUDA_CHECK(cudaMalloc(&p, size_t{1} << 62)),
                       doctest::Contains("cudaMalloc(&p, size_t{1} << 62)"), CudaError);
  (void)cudaGetLastError();
}
