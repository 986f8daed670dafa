// OCP FP8 E4M3 storage ("E4M3FN", CUDA's __nv_fp8_e4m3): 1 sign bit, 4 exponent bits (bias
// 7), 3 mantissa bits, subnormals, no infinities; 0x7F and 0xFF are NaN, ±448 the largest
// finite values. Narrowing rounds to nearest-even and saturates to ±448 (infinities included),
// as __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) does; NaN stays NaN. Widening is
// exact. The fp8_kv pass stores the KV cache in it; kernels compute in float.
#pragma once
#include <cstdint>
#include <cstring>

namespace perfsim::host {

struct fp8_e4m3 {
  uint8_t bits = 0;

  fp8_e4m3() = default;
  explicit fp8_e4m3(float f) : bits(from_float(f)) {}
  [[nodiscard]] explicit operator float() const { return to_float(bits); }

  [[nodiscard]] static uint8_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const auto sign = static_cast<uint8_t>((u >> 24) & 0x80u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);   // NaN
    if (abs >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // |f| >= 448 (inf too): 448
    if (abs < 0x3c800000u) {
      // Subnormal e4m3 (|f| < 2^-6): value = mantissa · 2^-9, rounded to nearest-even; a
      // mantissa rounding up to 8 is 0x08, the smallest normal, as it should be.
      if (abs < 0x3a800000u) return sign;                   // below half of 2^-9
      const uint32_t exp = abs >> 23;                       // biased float exponent, 117..120
      const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;  // with the implicit bit
      const uint32_t shift = 141u - exp;                    // 21..24
      uint32_t q = mant >> shift;
      const uint32_t rem = mant & ((1u << shift) - 1u);
      const uint32_t halfway = 1u << (shift - 1u);
      if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
      return static_cast<uint8_t>(sign | q);
    }
    // Normal: rebias the exponent (127 -> 7) and round the 20 dropped mantissa bits. Below 448
    // the carry reaches at most 0x7e (448): no NaN pattern.
    uint32_t q = (abs >> 20) - (120u << 3);
    const uint32_t rem = abs & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (q & 1u))) ++q;
    return static_cast<uint8_t>(sign | q);
  }

  [[nodiscard]] static float to_float(uint8_t b) {
    const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
    const uint32_t exp = (b >> 3) & 0xfu;
    const uint32_t mant = b & 0x7u;
    uint32_t u;
    if (exp == 0xfu && mant == 0x7u) {
      u = sign | 0x7fc00000u;  // NaN
    } else if (exp != 0) {
      u = sign | ((exp + 120u) << 23) | (mant << 20);
    } else {
      // Subnormal (or zero): mantissa · 2^-9, exact in float.
      const float f = static_cast<float>(mant) * 0x1p-9f;
      std::memcpy(&u, &f, sizeof u);
      u |= sign;
    }
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};

static_assert(sizeof(fp8_e4m3) == 1);

}  // namespace perfsim::host
