// Second stage of the norm backward passes: dgamma/dbeta[c] = Σ_p partial[p, c], summed in a
// fixed order so the result does not depend on scheduling. partial [parts, cols] fp32,
// out [cols]. A block covers 32 columns with 16 lanes of partials: lane y sums partials
// p ≡ y (mod 16) for its column (consecutive threads read consecutive columns: coalesced;
// several independent loads in flight), then lane 0 adds the 16 sums in order y = 0..15.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/norms.cuh"

namespace perfsim::cuda {

namespace {

constexpr int k_cols = 32, k_lanes = 16;

template <class T>
__global__ void __launch_bounds__(k_cols * k_lanes) sum_partials_kernel(
    const float* __restrict__ partial, T* __restrict__ out, int64_t parts, int64_t cols) {
  __shared__ float sums[k_lanes][k_cols + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * k_cols + tx;
  float s = 0.0f;
  if (c < cols) {
#pragma unroll 4
    for (int64_t p = ty; p < parts; p += k_lanes) s += partial[p * cols + c];
  }
  sums[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float t = 0.0f;
#pragma unroll
    for (int y = 0; y < k_lanes; ++y) t += sums[y][tx];
    out[c] = detail::from_f32<T>(t);
  }
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
  const auto blocks = static_cast<unsigned>((cols + k_cols - 1) / k_cols);
  sum_partials_kernel<T><<<blocks, dim3(k_cols, k_lanes), 0, stream>>>(partial, out, parts, cols);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template void detail::sum_partials<float>(const float*, float*, int64_t, int64_t, cudaStream_t);
template void detail::sum_partials<__nv_bfloat16>(const float*, __nv_bfloat16*, int64_t, int64_t,
                                                  cudaStream_t);
template void detail::sum_partials<__half>(const float*, __half*, int64_t, int64_t, cudaStream_t);

}  // namespace perfsim::cuda
