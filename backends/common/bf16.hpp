// bfloat16 storage: the top 16 bits of an IEEE float. Values are rounded to nearest-even
// when narrowed and widened exactly; kernels compute in float and only store bf16.
#pragma once
#include <cstdint>
#include <cstring>

namespace perfsim::host {

struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float f) : bits(from_float(f)) {}
  [[nodiscard]] explicit operator float() const { return to_float(bits); }

  [[nodiscard]] static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  [[nodiscard]] static float to_float(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};

static_assert(sizeof(bf16) == 2);

}  // namespace perfsim::host
