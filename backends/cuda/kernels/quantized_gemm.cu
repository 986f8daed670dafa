// GEMMs on quantized weights (quantized_gemm.cuh).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/quantized_gemm.cuh"
#include "core/cost/kernel_paths.hpp"

namespace perfsim::cuda {

namespace {

using detail::from_f32;
using detail::to_f32;

constexpr int gemv_threads = 256;  // 8 warps over the same 256 columns, each a chunk of rows
constexpr int gemv_warps = gemv_threads / 32;
constexpr int gemv_cols = 8;       // columns a thread owns: 4 bytes of int4, 8 of int8 per row
constexpr int gemv_unroll = 8;     // rows whose weight loads are in flight at once per thread
static_assert(gemv_threads / gemv_warps * gemv_cols == 256, "a warp covers the CTA's 256 columns");

// 2^23 + v as a float: v sits in the mantissa of 0x4B000000 (exact for v < 2^23). Widening a
// small integer this way costs a logic op and a subtraction instead of a slow int-to-float.
constexpr float magic = 8388608.0f;

// A row's 8 values of a thread's columns, dequantized: (q − zero) · scale = q · s − zero · s.
__device__ __forceinline__ void dequant8(uint32_t word, const float (&s)[gemv_cols], const float (&zs)[gemv_cols],
                                         float (&w)[gemv_cols]) {  // int4, the low nibble first
#pragma unroll
  for (int c = 0; c < gemv_cols; ++c) {
    const float q = __uint_as_float(0x4B000000u | ((word >> (4 * c)) & 0xFu)) - magic;
    w[c] = fmaf(q, s[c], -zs[c]);
  }
}
__device__ __forceinline__ void dequant8(uint2 word, const float (&s)[gemv_cols], const float (&)[gemv_cols],
                                         float (&w)[gemv_cols]) {  // int8: q + 128 = byte ^ 0x80
  const uint32_t half[2] = {word.x ^ 0x80808080u, word.y ^ 0x80808080u};
#pragma unroll
  for (int c = 0; c < gemv_cols; ++c) {
    // Bytes [q + 128, 0, 0, 0x4B]: the float 2^23 + 128 + q.
    const uint32_t bits = __byte_perm(half[c / 4], 0x4B000000u, 0x7540u | static_cast<uint32_t>(c % 4));
    w[c] = (__uint_as_float(bits) - (magic + 128.0f)) * s[c];
  }
}

template <bool Int4> struct RowWord;
template <> struct RowWord<true> {
  using type = uint32_t;
  __device__ static type load(const uint8_t* values, int64_t k, int64_t n, int64_t n0) {
    return __ldg(reinterpret_cast<const uint32_t*>(values + (k * n + n0) / 2));
  }
};
template <> struct RowWord<false> {
  using type = uint2;
  __device__ static type load(const uint8_t* values, int64_t k, int64_t n, int64_t n0) {
    return __ldg(reinterpret_cast<const uint2*>(values + k * n + n0));
  }
};

// blockIdx.x: 256 columns; blockIdx.y: a slice of k_per_split rows, split among the warps in
// contiguous chunks. Each warp's sums are added over the warps in shared memory, one row of A
// at a time, and the CTA writes its slice's partial sums.
template <class TA, int M, bool Int4>
__global__ void __launch_bounds__(gemv_threads)
    quantized_gemv_kernel(const TA* __restrict__ a, int m_rows, const uint8_t* __restrict__ values,
                          const __nv_bfloat16* __restrict__ scales, const __nv_bfloat16* __restrict__ zeros, int64_t k,
                          int64_t n, int64_t group, int64_t k_per_split, float* __restrict__ partials) {
  __shared__ float sums[gemv_warps][256];
  using Word = typename RowWord<Int4>::type;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 256 + lane * gemv_cols;
  const int64_t split_begin = static_cast<int64_t>(blockIdx.y) * k_per_split;
  const int64_t split_end = min(k, split_begin + k_per_split);
  const int64_t per_warp = (k_per_split + gemv_warps - 1) / gemv_warps;
  const int64_t kb = split_begin + warp * per_warp, ke = min(split_end, kb + per_warp);

  float acc[M][gemv_cols];
#pragma unroll
  for (int r = 0; r < M; ++r)
#pragma unroll
    for (int c = 0; c < gemv_cols; ++c) acc[r][c] = 0.0f;

  if (n0 < n && kb < ke) {
    float s[gemv_cols], zs[gemv_cols];
    int64_t group_end = 0;
    auto load_group = [&](int64_t row) {
      const int64_t g = row / group;
      group_end = (g + 1) * group;
      const uint4 sv = __ldg(reinterpret_cast<const uint4*>(scales + g * n + n0));
      const auto* sp = reinterpret_cast<const __nv_bfloat16*>(&sv);
      uint4 zv = make_uint4(0, 0, 0, 0);
      if (zeros != nullptr) zv = __ldg(reinterpret_cast<const uint4*>(zeros + g * n + n0));
      const auto* zp = reinterpret_cast<const __nv_bfloat16*>(&zv);
#pragma unroll
      for (int c = 0; c < gemv_cols; ++c) {
        s[c] = __bfloat162float(sp[c]);
        zs[c] = zeros != nullptr ? __bfloat162float(zp[c]) * s[c] : 0.0f;
      }
    };
    load_group(kb);
    for (int64_t row = kb; row < ke; row += gemv_unroll) {
      Word words[gemv_unroll];
#pragma unroll
      for (int u = 0; u < gemv_unroll; ++u)
        words[u] = row + u < ke ? RowWord<Int4>::load(values, row + u, n, n0) : Word{};
#pragma unroll
      for (int u = 0; u < gemv_unroll; ++u) {
        if (row + u < ke) {
          if (row + u >= group_end) load_group(row + u);
          float w[gemv_cols];
          dequant8(words[u], s, zs, w);
#pragma unroll
          for (int r = 0; r < M; ++r) {
            if (r < m_rows) {
              const float x = to_f32(a[static_cast<int64_t>(r) * k + row + u]);
#pragma unroll
              for (int c = 0; c < gemv_cols; ++c) acc[r][c] = fmaf(x, w[c], acc[r][c]);
            }
          }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < M; ++r) {
    if (r >= m_rows) break;  // the same for every thread: the barriers below stay uniform
#pragma unroll
    for (int c = 0; c < gemv_cols; ++c) sums[warp][lane * gemv_cols + c] = acc[r][c];
    __syncthreads();
    float total = 0;
#pragma unroll
    for (int w = 0; w < gemv_warps; ++w) total += sums[w][threadIdx.x];
    const int64_t col = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
    if (col < n) partials[(static_cast<int64_t>(blockIdx.y) * m_rows + r) * n + col] = total;
    __syncthreads();
  }
}

template <class TA, bool Int4>
void launch_gemv(const void* a, int64_t m, const QuantWeightView& w, int64_t splits, float* partials,
                 cudaStream_t stream) {
  const auto* values = static_cast<const uint8_t*>(w.data);
  const auto* scales = reinterpret_cast<const __nv_bfloat16*>(values + w.scale_offset);
  const auto* zeros = w.zeros ? reinterpret_cast<const __nv_bfloat16*>(values + w.zero_offset) : nullptr;
  const int64_t k_per_split = ((w.k + splits - 1) / splits + gemv_warps - 1) / gemv_warps * gemv_warps;
  const dim3 grid(static_cast<unsigned>((w.n + 255) / 256), static_cast<unsigned>(splits));
  const auto* x = static_cast<const TA*>(a);
  const int rows = static_cast<int>(m);
#define PERFSIM_GEMV(M_)                                                                                      \
  quantized_gemv_kernel<TA, M_, Int4><<<grid, gemv_threads, 0, stream>>>(x, rows, values, scales, zeros, w.k, \
                                                                         w.n, w.group, k_per_split, partials)
  if (m <= 1) PERFSIM_GEMV(1);
  else if (m <= 2) PERFSIM_GEMV(2);
  else if (m <= 4) PERFSIM_GEMV(4);
  else if (m <= 8) PERFSIM_GEMV(8);
  else throw std::logic_error("quantized_gemv: more than 8 rows (the GEMM dequantizes first)");
#undef PERFSIM_GEMV
  PERFSIM_CUDA_CHECK(cudaGetLastError());
}

template <class TC>
__global__ void sum_partials_kernel(const float* __restrict__ partials, int64_t splits, int64_t count, TC* c,
                                    bool accumulate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float total = accumulate ? to_f32(c[i]) : 0.0f;
    for (int64_t s = 0; s < splits; ++s) total += partials[s * count + i];
    c[i] = from_f32<TC>(total);
  }
}

// blockIdx.y (strided): rows of the weight; each thread 8 columns.
template <class TO, bool Int4>
__global__ void dequantize_kernel(const uint8_t* __restrict__ values, const __nv_bfloat16* __restrict__ scales,
                                  const __nv_bfloat16* __restrict__ zeros, int64_t k, int64_t n, int64_t group,
                                  TO* __restrict__ out) {
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * gemv_cols;
  if (n0 >= n) return;
  for (int64_t row = blockIdx.y; row < k; row += gridDim.y) {
    const int64_t g = row / group;
    float s[gemv_cols], zs[gemv_cols], w[gemv_cols];
#pragma unroll
    for (int c = 0; c < gemv_cols; ++c) {
      s[c] = __bfloat162float(scales[g * n + n0 + c]);
      zs[c] = zeros != nullptr ? __bfloat162float(zeros[g * n + n0 + c]) * s[c] : 0.0f;
    }
    dequant8(RowWord<Int4>::load(values, row, n, n0), s, zs, w);
    detail::store_f32<TO, gemv_cols>(out + row * n + n0, w);
  }
}

// Any shape: one element a thread (n not a multiple of 8).
template <class TO>
__global__ void dequantize_scalar_kernel(const uint8_t* __restrict__ values, const __nv_bfloat16* __restrict__ scales,
                                         const __nv_bfloat16* __restrict__ zeros, int64_t k, int64_t n, int64_t group,
                                         bool int4, TO* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < k * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / n, col = i % n, g = (row / group) * n + col;
    const float q = int4 ? static_cast<float>(i % 2 == 0 ? values[i / 2] & 0xF : values[i / 2] >> 4)
                         : static_cast<float>(static_cast<int8_t>(values[i]));
    const float zero = zeros != nullptr ? __bfloat162float(zeros[g]) : 0.0f;
    out[i] = from_f32<TO>((q - zero) * __bfloat162float(scales[g]));
  }
}

template <class TO>
void launch_dequantize(const QuantWeightView& w, void* out, cudaStream_t stream) {
  const auto* values = static_cast<const uint8_t*>(w.data);
  const auto* scales = reinterpret_cast<const __nv_bfloat16*>(values + w.scale_offset);
  const auto* zeros = w.zeros ? reinterpret_cast<const __nv_bfloat16*>(values + w.zero_offset) : nullptr;
  auto* o = static_cast<TO*>(out);
  if (quantized_gemv_fits(w) && detail::aligned(16, o)) {
    const int threads = 128;
    const dim3 grid(static_cast<unsigned>((w.n / gemv_cols + threads - 1) / threads),
                    static_cast<unsigned>(std::min<int64_t>(w.k, 65535)));
    if (w.int4) dequantize_kernel<TO, true><<<grid, threads, 0, stream>>>(values, scales, zeros, w.k, w.n, w.group, o);
    else dequantize_kernel<TO, false><<<grid, threads, 0, stream>>>(values, scales, zeros, w.k, w.n, w.group, o);
  } else {
    dequantize_scalar_kernel<TO><<<detail::grid_for(w.k * w.n, 256), 256, 0, stream>>>(values, scales, zeros, w.k, w.n,
                                                                                     w.group, w.int4, o);
  }
  PERFSIM_CUDA_CHECK(cudaGetLastError());
}

template <class TA>
__global__ void quantize_rows_kernel(const TA* __restrict__ a, int64_t k, int8_t* __restrict__ q,
                                     float* __restrict__ row_scales) {
  const TA* row = a + static_cast<int64_t>(blockIdx.x) * k;
  float amax = 0;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) amax = fmaxf(amax, fabsf(to_f32(row[i])));
  amax = detail::block_max(amax);
  const float scale = amax / 127.0f;
  if (threadIdx.x == 0) row_scales[blockIdx.x] = amax > 0 ? scale : 0.0f;
  int8_t* out = q + static_cast<int64_t>(blockIdx.x) * k;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x)
    out[i] = amax > 0 ? static_cast<int8_t>(fminf(fmaxf(rintf(to_f32(row[i]) / scale), -127.0f), 127.0f)) : 0;
}

template <class TC>
__global__ void scale_product_kernel(const int32_t* __restrict__ acc, const float* __restrict__ row_scales,
                                     const __nv_bfloat16* __restrict__ col_scales, int64_t m, int64_t n, TC* c,
                                     bool accumulate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = static_cast<float>(acc[i]) * row_scales[i / n] * __bfloat162float(col_scales[i % n]);
    c[i] = from_f32<TC>(accumulate ? to_f32(c[i]) + v : v);
  }
}

template <template <class> class Launch, class... Args>
void by_float_type(Elem e, const char* who, Args&&... args) {
  switch (e) {
    case Elem::f32: Launch<float>::run(args...); return;
    case Elem::bf16: Launch<__nv_bfloat16>::run(args...); return;
    case Elem::f16: Launch<__half>::run(args...); return;
    default: throw std::logic_error(std::string(who) + ": operands must be f32, bf16 or f16");
  }
}

template <class TA> struct GemvLaunch {
  static void run(const void* a, int64_t m, const QuantWeightView& w, int64_t splits, float* partials,
                  cudaStream_t stream) {
    if (w.int4) launch_gemv<TA, true>(a, m, w, splits, partials, stream);
    else launch_gemv<TA, false>(a, m, w, splits, partials, stream);
  }
};
template <class TC> struct SumLaunch {
  static void run(const float* partials, int64_t splits, int64_t count, void* c, bool accumulate, cudaStream_t stream) {
    sum_partials_kernel<TC><<<detail::grid_for(count, 256), 256, 0, stream>>>(partials, splits, count,
                                                                             static_cast<TC*>(c), accumulate);
    PERFSIM_CUDA_CHECK(cudaGetLastError());
  }
};
template <class TO> struct DequantLaunch {
  static void run(const QuantWeightView& w, void* out, cudaStream_t stream) { launch_dequantize<TO>(w, out, stream); }
};
template <class TA> struct QuantizeRowsLaunch {
  static void run(const void* a, int64_t m, int64_t k, int8_t* q, float* row_scales, cudaStream_t stream) {
    quantize_rows_kernel<TA><<<static_cast<unsigned>(m), 256, 0, stream>>>(static_cast<const TA*>(a), k, q, row_scales);
    PERFSIM_CUDA_CHECK(cudaGetLastError());
  }
};
template <class TC> struct ScaleLaunch {
  static void run(const int32_t* acc, const float* row_scales, const void* col_scales, int64_t m, int64_t n, void* c,
                  bool accumulate, cudaStream_t stream) {
    scale_product_kernel<TC><<<detail::grid_for(m * n, 256), 256, 0, stream>>>(
        acc, row_scales, static_cast<const __nv_bfloat16*>(col_scales), m, n, static_cast<TC*>(c), accumulate);
    PERFSIM_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace

int64_t quantized_gemv_splits_here(int64_t m, int64_t n, int64_t k, int64_t bits) {
  return quantized_gemv_splits(m, n, k, bits, detail::sm_count());
}

bool quantized_gemv_fits(const QuantWeightView& w) {
  return w.n % gemv_cols == 0 && w.scale_offset % 16 == 0 && (!w.zeros || w.zero_offset % 16 == 0) &&
         detail::aligned(16, w.data);
}

void quantized_gemv(const void* a, Elem a_type, int64_t m, const QuantWeightView& w, int64_t splits, float* partials,
                    cudaStream_t stream) {
  if (m <= 0 || w.n <= 0 || w.k <= 0) return;
  if (!quantized_gemv_fits(w)) throw std::logic_error("quantized_gemv: the weight's columns or scales are not aligned");
  by_float_type<GemvLaunch>(a_type, "quantized_gemv", a, m, w, splits, partials, stream);
}

void sum_gemv_partials(const float* partials, int64_t splits, int64_t m, int64_t n, void* c, Elem c_type,
                       bool accumulate, cudaStream_t stream) {
  if (m * n <= 0) return;
  by_float_type<SumLaunch>(c_type, "sum_gemv_partials", partials, splits, m * n, c, accumulate, stream);
}

void dequantize_weight(const QuantWeightView& w, void* out, Elem out_type, cudaStream_t stream) {
  if (w.k * w.n <= 0) return;
  by_float_type<DequantLaunch>(out_type, "dequantize_weight", w, out, stream);
}

void quantize_rows_int8(const void* a, Elem a_type, int64_t m, int64_t k, int8_t* q, float* row_scales,
                        cudaStream_t stream) {
  if (m <= 0 || k <= 0) return;
  by_float_type<QuantizeRowsLaunch>(a_type, "quantize_rows_int8", a, m, k, q, row_scales, stream);
}

void scale_int8_product(const int32_t* acc, const float* row_scales, const void* col_scales, int64_t m, int64_t n,
                        void* c, Elem c_type, bool accumulate, cudaStream_t stream) {
  if (m * n <= 0) return;
  by_float_type<ScaleLaunch>(c_type, "scale_int8_product", acc, row_scales, col_scales, m, n, c, accumulate, stream);
}

}  // namespace perfsim::cuda
