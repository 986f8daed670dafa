// Per-tensor fp8 e4m3 quantization (the "delayed/current scaling" recipe of NVIDIA
// Transformer Engine, current-scaling form): a grid-stride absmax reduction (block max, then
// one atomicMax per block on the float's bits: max is order-independent, so the result is
// deterministic), then a cast kernel y = e4m3(x·448/amax) saturating to ±448, and
// scale = amax/448 for the GEMM's dequantization. x, y [n]; scale [1]; workspace [1].
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/memory_ops.cuh"

namespace perfsim::cuda {

namespace {

constexpr int threads = 256;

// amax_bits holds max|x| as the bits of a non-negative float: for those, integer order is
// float order, so atomicMax on the bits is a float max.
template <class T>
__global__ void absmax_kernel(const T* __restrict__ x, int64_t n, unsigned* amax_bits) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float m = 0.0f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    m = fmaxf(m, fabsf(detail::to_f32(x[i])));
  m = detail::block_max(m);
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(m));
}

template <class T>
__global__ void cast_kernel(const T* __restrict__ x, __nv_fp8_e4m3* __restrict__ y, int64_t n,
                            const float* __restrict__ amax, float* __restrict__ scale) {
  const float a = *amax;
  const float inv = a > 0.0f ? fp8_e4m3_max / a : 1.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = a > 0.0f ? a / fp8_e4m3_max : 1.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = __nv_fp8_e4m3(detail::to_f32(x[i]) * inv);  // the conversion saturates to ±448
}

}  // namespace

template <class T>
void fp8_quantize(const T* x, __nv_fp8_e4m3* y, float* scale, int64_t n, float* workspace,
                  cudaStream_t stream) {
  PERFSIM_CUDA_CHECK(cudaMemsetAsync(workspace, 0, sizeof(float), stream));
  if (n > 0) {
    absmax_kernel<T><<<detail::grid_for(n, threads), threads, 0, stream>>>(
        x, n, reinterpret_cast<unsigned*>(workspace));
    PERFSIM_CUDA_CHECK_LAUNCH();
  }
  cast_kernel<T><<<detail::grid_for(n > 0 ? n : 1, threads), threads, 0, stream>>>(x, y, n, workspace,
                                                                                    scale);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template void fp8_quantize<float>(const float*, __nv_fp8_e4m3*, float*, int64_t, float*, cudaStream_t);
template void fp8_quantize<__nv_bfloat16>(const __nv_bfloat16*, __nv_fp8_e4m3*, float*, int64_t,
                                          float*, cudaStream_t);
template void fp8_quantize<__half>(const __half*, __nv_fp8_e4m3*, float*, int64_t, float*,
                                   cudaStream_t);

}  // namespace perfsim::cuda
