// Second stage of the norm backward passes: dgamma/dbeta[c] = Σ_p partial[p, c], summed in a
// fixed order so the result does not depend on scheduling. partial [parts, cols] fp32
// (blockIdx.y = 1: the next `parts` rows, into `second`), out [cols]. A block covers 32
// columns with 32 lanes of partials: lane y sums partials p ≡ y (mod 32) for its column
// (consecutive threads read consecutive columns: coalesced; all of a thread's loads in
// flight at once), then lane 0 adds the 32 sums in order y = 0..31. Launched with
// programmatic stream serialization so its launch latency hides behind the norm kernel's end.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norms.cuh"

namespace perfsim::cuda {

namespace {

constexpr int k_cols = 32, k_lanes = 32;

template <class T>
__global__ void __launch_bounds__(k_cols * k_lanes) sum_partials_kernel(
    const float* __restrict__ partial, T* __restrict__ out, T* __restrict__ second, int64_t parts,
    int64_t cols) {
  // The partials are written by the kernel before this one: wait for it (a no-op when this
  // grid was not launched early).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  __shared__ float sums[k_lanes][k_cols + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * k_cols + tx;
  const float* src = partial + static_cast<int64_t>(blockIdx.y) * parts * cols;
  T* dst = blockIdx.y == 0 ? out : second;
  float s = 0.0f;
  if (c < cols) {
#pragma unroll 8
    for (int64_t p = ty; p < parts; p += k_lanes) s += src[p * cols + c];
  }
  sums[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float t = 0.0f;
#pragma unroll
    for (int y = 0; y < k_lanes; ++y) t += sums[y][tx];
    dst[c] = detail::from_f32<T>(t);
  }
}

}  // namespace

int64_t detail::norm_bwd_blocks(int64_t rows) { return rows < 512 ? (rows < 1 ? 1 : rows) : 512; }

int64_t norm_bwd_workspace_floats(int64_t rows, int64_t cols) {
  return 2 * detail::norm_bwd_blocks(rows) * cols;  // dgamma and dbeta partials
}

template <class T>
void detail::sum_partials(const float* partial, T* out, int64_t parts, int64_t cols,
                          cudaStream_t stream, T* second) {
  if (cols <= 0) return;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>((cols + k_cols - 1) / k_cols), second != nullptr ? 2 : 1);
  cfg.blockDim = dim3(k_cols, k_lanes);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  PERFSIM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, sum_partials_kernel<T>, partial, out, second, parts, cols));
}

template void detail::sum_partials<float>(const float*, float*, int64_t, int64_t, cudaStream_t,
                                          float*);
template void detail::sum_partials<__nv_bfloat16>(const float*, __nv_bfloat16*, int64_t, int64_t,
                                                  cudaStream_t, __nv_bfloat16*);
template void detail::sum_partials<__half>(const float*, __half*, int64_t, int64_t, cudaStream_t,
                                           __half*);

}  // namespace perfsim::cuda
