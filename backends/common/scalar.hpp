// Storage types the CPU kernels are instantiated for (float, bf16, half; fp8 e4m3 for a KV
// cache), the float widening/narrowing every kernel uses, and whole-array conversion between
// storage dtypes.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/common/bf16.hpp"
#include "backends/common/fp8.hpp"
#include "backends/common/half.hpp"
#include "core/config/dtype.hpp"

namespace perfsim::host {

[[nodiscard]] inline float to_f32(float x) { return x; }
[[nodiscard]] inline float to_f32(bf16 x) { return bf16::to_float(x.bits); }
[[nodiscard]] inline float to_f32(half x) { return half::to_float(x.bits); }
[[nodiscard]] inline float to_f32(fp8_e4m3 x) { return fp8_e4m3::to_float(x.bits); }

template <class T>
[[nodiscard]] inline T from_f32(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return T(x);
}

// How a dtype is laid out in memory: tf32 is an fp32 compute mode, stored as fp32; fp8 as OCP
// e4m3 bytes (which ops read them is each backend's business: the CPU reads and writes only
// a KV cache in fp8, its GEMMs take none).
enum class Storage { f32, bf16, f16, i32, unsupported, f8e4m3 };
[[nodiscard]] Storage storage_of(DType t);
[[nodiscard]] const char* name_of(Storage s);
[[nodiscard]] int bytes_of(Storage s);

// dst[i] = src[i] for n elements between float storages (f32, bf16, f16, f8e4m3), rounding to
// nearest-even when narrowing (saturating to ±448 into f8e4m3). fp8 values are converted as
// stored, without any scale. src and dst must not overlap.
void convert(const void* src, Storage src_type, void* dst, Storage dst_type, int64_t n);

}  // namespace perfsim::host
