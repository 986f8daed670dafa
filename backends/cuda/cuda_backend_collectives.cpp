// CudaBackend's collective hook for `perfsim calibrate`: one NCCL communicator over the first
// `group` GPUs, each payload timed as nccl-tests does (median of repeats of back-to-back
// collectives, the slowest rank), ring/tree algorithms only (what the cost model prices).
#include <fmt/format.h>

#include <cstdlib>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/nccl_collectives.hpp"
#include "backends/cuda/nccl_comm.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

int CudaBackend::gpu_count() const { return nccl_available() ? device_count() : 1; }

std::vector<double> CudaBackend::time_collective(Collective c, int group, const std::vector<double>& payload_bytes) {
  if (!nccl_available()) throw NotExecutable("cuda backend: perfsim was built without NCCL: no collectives");
  if (group < 2 || group > device_count())
    throw NotExecutable(fmt::format("cuda backend: a {}-GPU collective needs {} GPUs, {} visible", group, group,
                                    device_count()));
  // NVLink SHARP (NVLS) is another algorithm than the ring the cost model describes.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  NcclComm comm = NcclComm::over_visible(group);
  std::vector<double> seconds;
  seconds.reserve(payload_bytes.size());
  for (double bytes : payload_bytes) {
    CollectiveSpec spec;
    spec.op = c;
    spec.dtype = DType::bf16;
    spec.bytes = static_cast<std::size_t>(bytes);
    const CollectiveResult r = perfsim::cuda::time_collective(comm, spec);
    seconds.push_back(r.time);
  }
  // Leave GPU 0 current for the graphs run after this.
  PERFSIM_CUDA_CHECK(cudaSetDevice(0));
  return seconds;
}

}  // namespace perfsim::cuda
