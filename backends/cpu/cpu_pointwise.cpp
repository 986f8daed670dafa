// Elementwise kernels: ReLU, GELU (tanh approximation, Hendrycks & Gimpel 2016), SwiGLU's
// silu(gate)·up (Shazeer 2020), their backward passes, the residual add, and rotary
// position embeddings (RoFormer, Su et al. 2021, "rotate half" pairing (i, i + d/2)), also at
// explicit per-token positions (rope_at, a serving engine's packed step).
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

namespace {

constexpr int64_t elem_grain = 1 << 15;
constexpr float gelu_k = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float gelu_c = 0.044715f;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// tanh(u) = 1 − 2/(e^{2u} + 1): absolute error below 2e-7 (all GELU needs, as it uses 1 ± tanh)
// and several times faster than std::tanh; saturates cleanly to ±1 when e^{2u} over/underflows.
float tanh_abs(float u) { return 1.0f - 2.0f / (std::exp(2.0f * u) + 1.0f); }

template <class F>
void for_elements(int64_t n, F f) {
  parallel_for(n, elem_grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

}  // namespace

template <class T>
void gelu(const T* x, T* y, int64_t n) {
  for_elements(n, [&](int64_t i) {
    const float v = to_f32(x[i]);
    y[i] = from_f32<T>(0.5f * v * (1.0f + tanh_abs(gelu_k * (v + gelu_c * v * v * v))));
  });
}

template <class T>
void gelu_bwd(const T* x, const T* dy, T* dx, int64_t n) {
  for_elements(n, [&](int64_t i) {
    const float v = to_f32(x[i]);
    const float u = gelu_k * (v + gelu_c * v * v * v);
    const float t = tanh_abs(u);
    const float du = gelu_k * (1.0f + 3.0f * gelu_c * v * v);
    const float grad = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
    dx[i] = from_f32<T>(grad * to_f32(dy[i]));
  });
}

template <class T>
void silu_mul(const T* gate, const T* up, T* y, int64_t n) {
  for_elements(n, [&](int64_t i) {
    const float g = to_f32(gate[i]);
    y[i] = from_f32<T>(g * sigmoid(g) * to_f32(up[i]));
  });
}

template <class T>
void silu_mul_bwd(const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t n) {
  for_elements(n, [&](int64_t i) {
    const float g = to_f32(gate[i]);
    const float u = to_f32(up[i]);
    const float d = to_f32(dy[i]);
    const float s = sigmoid(g);
    // d silu(g)/dg = s·(1 + g·(1 − s))
    dgate[i] = from_f32<T>(d * u * s * (1.0f + g * (1.0f - s)));
    dup[i] = from_f32<T>(d * g * s);
  });
}

template <class T>
void relu(const T* x, T* y, int64_t n) {
  for_elements(n, [&](int64_t i) { y[i] = from_f32<T>(std::max(to_f32(x[i]), 0.0f)); });
}

template <class T>
void relu_bwd(const T* y, const T* dy, T* dx, int64_t n) {
  for_elements(n, [&](int64_t i) { dx[i] = to_f32(y[i]) > 0.0f ? dy[i] : from_f32<T>(0.0f); });
}

template <class T>
void residual_add(const T* a, const T* b, T* out, int64_t n) {
  for_elements(n, [&](int64_t i) { out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i])); });
}

namespace {

// Rotates each (i, i + d/2) pair of every head of every token by ±angle(pos, i), token t at
// positions[t] when given (varlen), else at r.position_of(t): one rotation for both, so a
// token rotates alike whichever way its position is told.
template <class T>
void rotate(const T* x, T* y, const RopeShape& r, float sign, const int32_t* positions = nullptr) {
  const int64_t d = r.head_dim, half_d = d / 2;
  // inv_freq[i] = 10000^(−2i/d) (RoFormer eq. 15), computed once per call.
  std::vector<float> inv_freq(static_cast<std::size_t>(half_d));
  for (int64_t i = 0; i < half_d; ++i)
    inv_freq[static_cast<std::size_t>(i)] =
        static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
  parallel_for(r.tokens, std::max<int64_t>(1, elem_grain / std::max<int64_t>(r.heads * d, 1)),
               [&](int64_t t0, int64_t t1) {
    float* cs = detail::thread_scratch(0, static_cast<std::size_t>(2 * half_d));
    for (int64_t t = t0; t < t1; ++t) {
      const auto pos = static_cast<double>(positions != nullptr ? int64_t{positions[t]} : r.position_of(t));
      for (int64_t i = 0; i < half_d; ++i) {
        const double ang = pos * inv_freq[static_cast<std::size_t>(i)];
        cs[i] = static_cast<float>(std::cos(ang));
        cs[half_d + i] = sign * static_cast<float>(std::sin(ang));
      }
      for (int64_t h = 0; h < r.heads; ++h) {
        const T* xr = x + (t * r.heads + h) * d;
        T* yr = y + (t * r.heads + h) * d;
        for (int64_t i = 0; i < half_d; ++i) {
          const float a = to_f32(xr[i]), b = to_f32(xr[i + half_d]);
          const float c = cs[i], s = cs[half_d + i];
          yr[i] = from_f32<T>(a * c - b * s);
          yr[i + half_d] = from_f32<T>(b * c + a * s);
        }
        if (d % 2 != 0) yr[d - 1] = xr[d - 1];  // an odd last element has no partner
      }
    }
  });
}

}  // namespace

template <class T>
void rope(const T* x, T* y, const RopeShape& r) {
  rotate(x, y, r, 1.0f);
}

template <class T>
void rope_bwd(const T* dy, T* dx, const RopeShape& r) {
  rotate(dy, dx, r, -1.0f);
}

template <class T>
void rope_at(const T* x, const int32_t* positions, T* y, const RopeShape& r) {
  for (int64_t t = 0; t < r.tokens; ++t)
    if (positions[t] < 0)
      throw std::out_of_range(fmt::format("varlen rope: token {} has position {}", t, positions[t]));
  rotate(x, y, r, 1.0f, positions);
}

#define PERFSIM_INSTANTIATE_POINTWISE(T)                                          \
  template void gelu<T>(const T*, T*, int64_t);                                   \
  template void gelu_bwd<T>(const T*, const T*, T*, int64_t);                     \
  template void silu_mul<T>(const T*, const T*, T*, int64_t);                     \
  template void silu_mul_bwd<T>(const T*, const T*, const T*, T*, T*, int64_t);   \
  template void residual_add<T>(const T*, const T*, T*, int64_t);                 \
  template void relu<T>(const T*, T*, int64_t);                                   \
  template void relu_bwd<T>(const T*, const T*, T*, int64_t);                     \
  template void rope<T>(const T*, T*, const RopeShape&);                          \
  template void rope_bwd<T>(const T*, T*, const RopeShape&);                      \
  template void rope_at<T>(const T*, const int32_t*, T*, const RopeShape&);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_POINTWISE)

}  // namespace perfsim::cpu
