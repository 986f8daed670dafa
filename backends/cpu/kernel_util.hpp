// Small helpers shared by the CPU kernel files: float dot products that vectorize without
// -ffast-math, row loads that widen to float, and explicit instantiation for the storages.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/host_names.hpp"

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
