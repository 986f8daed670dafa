// Helpers for the CPU kernel tests: seeded random inputs, storage round trips and the
// normalized error max|got − want| / max|want| the tests bound (fp32 1e-5, bf16 1e-2).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backends/common/scalar.hpp"

namespace perfsim::cpu::test {

inline std::vector<float> random_vec(std::size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<int32_t> random_ids(std::size_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(dist(rng));
  return v;
}

template <class T>
std::vector<T> to_storage(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = host::from_f32<T>(v[i]);
  return out;
}

template <class T>
std::vector<float> to_floats(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = host::to_f32(v[i]);
  return out;
}

// The values a storage type can hold: v rounded through T.
template <class T>
std::vector<float> rounded(const std::vector<float>& v) {
  return to_floats(to_storage<T>(v));
}

template <class A, class B>
double rel_err(const std::vector<A>& got, const std::vector<B>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::isnan(g) != std::isnan(w)) return INFINITY;
    num = std::max(num, std::abs(g - w));
    den = std::max(den, std::abs(w));
  }
  return den > 0 ? num / den : num;
}

template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

}  // namespace perfsim::cpu::test
