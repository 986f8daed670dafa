// Element types the CUDA backend stores (host::Storage plus fp8 e4m3), and the conversions
// its op runner needs to stage operands: between float storages, and fp8 quantization with
// a per-tensor scale (optionally transposing, for the layouts cuBLASLt's fp8 GEMM accepts).
// All launchers are asynchronous on `stream` and capturable into CUDA graphs.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/common/scalar.hpp"
#include "core/config/dtype.hpp"

namespace perfsim::cuda {

enum class Elem { f32, bf16, f16, e4m3, i32, unsupported };
[[nodiscard]] Elem elem_of(DType t);
[[nodiscard]] int bytes_of(Elem e);
[[nodiscard]] const char* name_of(Elem e);
// The host::Storage of a float/int element type (e4m3 -> Storage::unsupported).
[[nodiscard]] host::Storage storage_of(Elem e);
[[nodiscard]] Elem elem_of(host::Storage s);

// The largest finite e4m3 value (OCP FP8 spec, E4M3: 448).
inline constexpr float e4m3_max = 448.0f;

// y = x for n elements between f32, bf16 and f16 (round to nearest-even when narrowing).
// Equal types copy bytes. x and y must not overlap.
void convert(const void* x, Elem x_type, void* y, Elem y_type, int64_t n, cudaStream_t stream);

// fp8 quantization of x [batch][rows, cols] (f32, bf16 or f16) into q: the scale is
// amax(|x|) / 448 (1 when x is all zero), written to *scale, and q = e4m3(x / scale),
// saturating. transpose: q is [batch][cols, rows]. amax_ws: one float of device workspace.
void quantize_e4m3(const void* x, Elem x_type, uint8_t* q, float* scale, float* amax_ws,
                   int64_t batch, int64_t rows, int64_t cols, bool transpose, cudaStream_t stream);
// q = x for an e4m3 x [batch][rows, cols], transposed to [batch][cols, rows]; the scale
// is copied from x_scale to *scale.
void transpose_e4m3(const uint8_t* x, const float* x_scale, uint8_t* q, float* scale,
                    int64_t batch, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace perfsim::cuda
