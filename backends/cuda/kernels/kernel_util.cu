// Host side of kernel_util.cuh: the SM count used to size grid-stride launches.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda::detail {

int sm_count() {
  constexpr int max_devices = 64;
  static int cached[max_devices] = {};  // 0 = not read yet
  int dev = 0;
  PERFSIM_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= max_devices) dev = max_devices - 1;
  if (cached[dev] == 0) {
    int sms = 0;
    PERFSIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cached[dev] = sms > 0 ? sms : 1;
  }
  return cached[dev];
}

}  // namespace perfsim::cuda::detail
