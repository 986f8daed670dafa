// Second stage of the norm backward passes: dgamma/dbeta[c] = Σ_p partial[p, c], summed in a
// fixed order (p = 0, 1, ...) so the result does not depend on scheduling. partial
// [parts, cols] fp32, out [cols]. One thread per column: consecutive threads read
// consecutive columns (coalesced).
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norms.cuh"

namespace perfsim::cuda {

namespace {

template <class T>
__global__ void sum_partials_kernel(const float* __restrict__ partial, T* __restrict__ out,
                                    int64_t parts, int64_t cols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int64_t p = 0; p < parts; ++p) s += partial[p * cols + c];
  out[c] = detail::from_f32<T>(s);
}

}  // namespace

int64_t detail::norm_bwd_blocks(int64_t rows) { return rows < 512 ? (rows < 1 ? 1 : rows) : 512; }

int64_t norm_bwd_workspace_floats(int64_t rows, int64_t cols) {
  return 2 * detail::norm_bwd_blocks(rows) * cols;  // dgamma and dbeta partials
}

template <class T>
void detail::sum_partials(const float* partial, T* out, int64_t parts, int64_t cols,
                          cudaStream_t stream) {
  if (cols <= 0) return;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((cols + threads - 1) / threads);
  sum_partials_kernel<T><<<blocks, threads, 0, stream>>>(partial, out, parts, cols);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template void detail::sum_partials<float>(const float*, float*, int64_t, int64_t, cudaStream_t);
template void detail::sum_partials<__nv_bfloat16>(const float*, __nv_bfloat16*, int64_t, int64_t,
                                                  cudaStream_t);
template void detail::sum_partials<__half>(const float*, __half*, int64_t, int64_t, cudaStream_t);

}  // namespace perfsim::cuda
