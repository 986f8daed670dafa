// Conversions between stored element types (see cuda_convert.hpp): grid-stride kernels,
// fp32 in between. fp8 quantization makes two passes: an amax reduction (block sums then
// one atomicMax per block on the float's bits, valid because |x| >= 0) and the scaled cast.
#include "backends/cuda/cuda_convert.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <stdexcept>

#include "backends/cuda/cuda_check.hpp"

namespace perfsim::cuda {

Elem elem_of(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32: return Elem::f32;
    case DType::bf16: return Elem::bf16;
    case DType::fp16: return Elem::f16;
    case DType::fp8: return Elem::e4m3;
    case DType::int32: return Elem::i32;
    case DType::int8:
    case DType::int4: return Elem::unsupported;
  }
  return Elem::unsupported;
}

int bytes_of(Elem e) {
  switch (e) {
    case Elem::f32:
    case Elem::i32: return 4;
    case Elem::bf16:
    case Elem::f16: return 2;
    case Elem::e4m3: return 1;
    case Elem::unsupported: return 0;
  }
  return 0;
}

const char* name_of(Elem e) {
  switch (e) {
    case Elem::f32: return "f32";
    case Elem::bf16: return "bf16";
    case Elem::f16: return "f16";
    case Elem::e4m3: return "e4m3";
    case Elem::i32: return "i32";
    case Elem::unsupported: return "unsupported";
  }
  return "?";
}

host::Storage storage_of(Elem e) {
  switch (e) {
    case Elem::f32: return host::Storage::f32;
    case Elem::bf16: return host::Storage::bf16;
    case Elem::f16: return host::Storage::f16;
    case Elem::i32: return host::Storage::i32;
    default: return host::Storage::unsupported;
  }
}

Elem elem_of(host::Storage s) {
  switch (s) {
    case host::Storage::f32: return Elem::f32;
    case host::Storage::bf16: return Elem::bf16;
    case host::Storage::f16: return Elem::f16;
    case host::Storage::i32: return Elem::i32;
    case host::Storage::f8e4m3: return Elem::e4m3;
    case host::Storage::unsupported: return Elem::unsupported;
  }
  return Elem::unsupported;
}

namespace {

constexpr int threads = 256;

int blocks_for(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 4096)); }

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

template <class X, class Y>
__global__ void convert_kernel(const X* x, Y* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    store(y, i, load(x, i));
}

template <class X>
void convert_from(const X* x, void* y, Elem yt, int64_t n, cudaStream_t s) {
  switch (yt) {
    case Elem::f32: convert_kernel<<<blocks_for(n), threads, 0, s>>>(x, static_cast<float*>(y), n); break;
    case Elem::bf16: convert_kernel<<<blocks_for(n), threads, 0, s>>>(x, static_cast<__nv_bfloat16*>(y), n); break;
    case Elem::f16: convert_kernel<<<blocks_for(n), threads, 0, s>>>(x, static_cast<__half*>(y), n); break;
    default: throw std::invalid_argument("cuda convert: target must be f32, bf16 or f16");
  }
  PERFSIM_CUDA_CHECK_LAUNCH();
}

template <class X>
__global__ void amax_kernel(const X* x, int64_t n, float* amax) {
  float m = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    m = fmaxf(m, fabsf(load(x, i)));
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float warp_max[threads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < threads / 32; ++w) m = fmaxf(m, warp_max[w]);
    // Non-negative floats order like their bit patterns as unsigned integers.
    atomicMax(reinterpret_cast<unsigned int*>(amax), __float_as_uint(m));
  }
}

__device__ __forceinline__ float scale_from_amax(float amax) { return amax > 0.0f ? amax / e4m3_max : 1.0f; }

// Element i of x [batch][rows, cols] goes to q at the same index, or transposed.
__device__ __forceinline__ int64_t target_index(int64_t i, int64_t rows, int64_t cols, bool transpose) {
  if (!transpose) return i;
  const int64_t per = rows * cols, b = i / per, r = (i % per) / cols, c = i % cols;
  return b * per + c * rows + r;
}

template <class X>
__global__ void quantize_kernel(const X* x, uint8_t* q, float* scale, const float* amax, int64_t batch,
                                int64_t rows, int64_t cols, bool transpose) {
  const float sc = scale_from_amax(*amax);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = sc;
  const float inv = 1.0f / sc;
  const int64_t n = batch * rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    q[target_index(i, rows, cols, transpose)] =
        static_cast<uint8_t>(__nv_cvt_float_to_fp8(load(x, i) * inv, __NV_SATFINITE, __NV_E4M3));
}

__global__ void transpose_bytes_kernel(const uint8_t* x, const float* x_scale, uint8_t* q, float* scale,
                                       int64_t batch, int64_t rows, int64_t cols) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = *x_scale;
  const int64_t n = batch * rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    q[target_index(i, rows, cols, true)] = x[i];
}

template <class X>
void quantize_typed(const X* x, uint8_t* q, float* scale, float* amax_ws, int64_t batch, int64_t rows,
                    int64_t cols, bool transpose, cudaStream_t s) {
  const int64_t n = batch * rows * cols;
  PERFSIM_CUDA_CHECK(cudaMemsetAsync(amax_ws, 0, sizeof(float), s));
  amax_kernel<<<blocks_for(n), threads, 0, s>>>(x, n, amax_ws);
  PERFSIM_CUDA_CHECK_LAUNCH();
  quantize_kernel<<<blocks_for(n), threads, 0, s>>>(x, q, scale, amax_ws, batch, rows, cols, transpose);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void convert(const void* x, Elem xt, void* y, Elem yt, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (xt == yt) {
    PERFSIM_CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<std::size_t>(n) * static_cast<std::size_t>(bytes_of(xt)),
                                       cudaMemcpyDeviceToDevice, s));
    return;
  }
  switch (xt) {
    case Elem::f32: convert_from(static_cast<const float*>(x), y, yt, n, s); break;
    case Elem::bf16: convert_from(static_cast<const __nv_bfloat16*>(x), y, yt, n, s); break;
    case Elem::f16: convert_from(static_cast<const __half*>(x), y, yt, n, s); break;
    default: throw std::invalid_argument("cuda convert: source must be f32, bf16 or f16");
  }
}

void quantize_e4m3(const void* x, Elem xt, uint8_t* q, float* scale, float* amax_ws, int64_t batch,
                   int64_t rows, int64_t cols, bool transpose, cudaStream_t s) {
  if (batch * rows * cols <= 0) return;
  switch (xt) {
    case Elem::f32: quantize_typed(static_cast<const float*>(x), q, scale, amax_ws, batch, rows, cols, transpose, s); break;
    case Elem::bf16:
      quantize_typed(static_cast<const __nv_bfloat16*>(x), q, scale, amax_ws, batch, rows, cols, transpose, s);
      break;
    case Elem::f16: quantize_typed(static_cast<const __half*>(x), q, scale, amax_ws, batch, rows, cols, transpose, s); break;
    default: throw std::invalid_argument("cuda quantize_e4m3: source must be f32, bf16 or f16");
  }
}

void transpose_e4m3(const uint8_t* x, const float* x_scale, uint8_t* q, float* scale, int64_t batch,
                    int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t n = batch * rows * cols;
  if (n <= 0) return;
  transpose_bytes_kernel<<<blocks_for(n), threads, 0, s>>>(x, x_scale, q, scale, batch, rows, cols);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace perfsim::cuda
