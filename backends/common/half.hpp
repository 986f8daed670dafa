// IEEE binary16 storage (fp16). Narrowing rounds to nearest-even, handles subnormals,
// overflow to infinity and NaN; widening is exact. Kernels compute in float.
#pragma once
#include <cstdint>
#include <cstring>

namespace perfsim::host {

struct half {
  uint16_t bits = 0;

  half() = default;
  explicit half(float f) : bits(from_float(f)) {}
  [[nodiscard]] explicit operator float() const { return to_float(bits); }

  [[nodiscard]] static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // rounds to >= 65520: inf
    if (abs < 0x38800000u) {
      // Subnormal half (|f| < 2^-14): value = mantissa * 2^-24, rounded to nearest-even.
      if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of 2^-24
      const uint32_t exp = abs >> 23;                              // biased float exponent
      const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;         // with the implicit bit
      const uint32_t shift = 126u - exp;                           // 14..24
      uint32_t h = mant >> shift;
      const uint32_t rem = mant & ((1u << shift) - 1u);
      const uint32_t halfway = 1u << (shift - 1u);
      if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
      return static_cast<uint16_t>(sign | h);
    }
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits.
    uint32_t h = ((abs >> 13) - (112u << 10));
    const uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach inf: correct
    return static_cast<uint16_t>(sign | h);
  }

  [[nodiscard]] static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1fu) {
      u = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
      u = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
      u = sign;
    } else {
      // Subnormal: normalize the mantissa.
      uint32_t e = 113u;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --e;
      }
      u = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};

static_assert(sizeof(half) == 2);

}  // namespace perfsim::host
