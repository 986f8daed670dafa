// Small helpers shared by the CPU kernel files: float dot products that vectorize without
// -ffast-math, row loads that widen to float, KV cache rows read and written in the cache's
// storage (the op's float type or fp8 e4m3), and explicit instantiation for the storages.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/host_names.hpp"
#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cpu::detail {

// Σ a[i]·b[i] over n floats with eight independent partial sums (a fixed order, so the
// result does not depend on threads or alignment).
[[nodiscard]] inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; ++u) acc[u] += a[i + u] * b[i + u];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[i] += alpha · x[i]
inline void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// dst[r, :] = float(src[r·stride, :n]) for `rows` rows.
template <class T>
inline void load_rows(const T* src, int64_t stride, int64_t rows, int64_t n, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = src + r * stride;
    float* d = dst + r * n;
    for (int64_t i = 0; i < n; ++i) d[i] = to_f32(s[i]);
  }
}

// dst[r·stride, :n] = T(src[r, :]) for `rows` rows.
template <class T>
inline void store_rows(const float* src, int64_t rows, int64_t n, T* dst, int64_t stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * n;
    T* d = dst + r * stride;
    for (int64_t i = 0; i < n; ++i) d[i] = from_f32<T>(s[i]);
  }
}

// src as floats: src itself for float storage, else widened into buf (n floats).
template <class T>
[[nodiscard]] inline const float* as_float(const T* src, int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return src;
  } else {
    for (int64_t i = 0; i < n; ++i) buf[i] = to_f32(src[i]);
    return buf;
  }
}

// fp8 e4m3 bytes as floats by table: decoding bit by bit would branch on every element of
// every K/V row an fp8 cache's attention reads.
[[nodiscard]] inline const float* e4m3_values() {
  static const std::array<float, 256> values = [] {
    std::array<float, 256> v{};
    for (int b = 0; b < 256; ++b) v[static_cast<std::size_t>(b)] = fp8_e4m3::to_float(static_cast<uint8_t>(b));
    return v;
  }();
  return values.data();
}

// Whether C is the fp8 storage of a KV cache (ops::KvStorage::fp8): rows hold stored values whose
// meaning is stored · scale.
template <class C> inline constexpr bool is_fp8 = std::is_same_v<C, fp8_e4m3>;

// A cache of type C is what the shape says the op's cache is (a kernel handed fp8 bytes as
// floats, or the reverse, would read garbage): std::logic_error otherwise.
template <class C>
inline void check_kv_storage(const ops::KvStorage& kv, const char* kernel) {
  if (kv.fp8 != is_fp8<C>)
    throw std::logic_error(std::string(kernel) + (kv.fp8 ? ": the KV cache is fp8 but the kernel reads it as floats"
                                                         : ": the KV cache is not fp8 but the kernel reads it as fp8"));
  if (kv.fp8 && !(kv.scale > 0)) throw std::logic_error(std::string(kernel) + ": an fp8 KV cache needs a scale > 0");
}

// dst[:n] = the values of a KV cache row: float(src) in the cache's float type, or
// e4m3(src) · scale in an fp8 cache (the scale is the cache's, ops::KvStorage).
template <class C>
inline void load_kv_row(const C* src, int64_t n, float scale, float* dst) {
  if constexpr (is_fp8<C>) {
    const float* values = e4m3_values();
    for (int64_t i = 0; i < n; ++i) dst[i] = values[src[i].bits] * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
  }
}

// A KV cache row from new rows of the op's type T: copied as they are in a cache of type T, or
// e4m3(x / scale), rounded to nearest-even and saturated to ±448, in an fp8 cache.
template <class T, class C>
inline void store_kv_row(const T* src, int64_t n, float scale, C* dst) {
  if constexpr (is_fp8<C>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e4m3(to_f32(src[i]) / scale);
  } else {
    static_assert(std::is_same_v<T, C>, "a float cache has the op's type");
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
  }
}

// A per-thread float scratch that grows as needed and is reused across calls (tile-sized:
// the equivalent of registers and shared memory on a GPU, not a tensor).
[[nodiscard]] inline float* thread_scratch(std::size_t slot, std::size_t n) {
  thread_local std::vector<std::vector<float>> scratch;
  if (scratch.size() <= slot) scratch.resize(slot + 1);
  if (scratch[slot].size() < n) scratch[slot].resize(n);
  return scratch[slot].data();
}

}  // namespace perfsim::cpu::detail

// Instantiates a kernel template for the three float storages.
#define PERFSIM_CPU_INSTANTIATE(MACRO) \
  MACRO(float)                         \
  MACRO(::perfsim::cpu::bf16)          \
  MACRO(::perfsim::cpu::half)
// Instantiates a kernel over a KV cache for the three float storages T, each with a cache of
// type T and an fp8 cache: MACRO(T, C).
#define PERFSIM_CPU_INSTANTIATE_KV(MACRO)                       \
  MACRO(float, float)                                          \
  MACRO(::perfsim::cpu::bf16, ::perfsim::cpu::bf16)            \
  MACRO(::perfsim::cpu::half, ::perfsim::cpu::half)            \
  MACRO(float, ::perfsim::cpu::fp8_e4m3)                       \
  MACRO(::perfsim::cpu::bf16, ::perfsim::cpu::fp8_e4m3)        \
  MACRO(::perfsim::cpu::half, ::perfsim::cpu::fp8_e4m3)
