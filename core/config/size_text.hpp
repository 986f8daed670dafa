// How sizes read in error messages about bounds: "1e+12" for the round numbers scripts write
// that way, "16,777,216" for the bounds themselves.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace perfsim {

// Digits grouped by thousands: 16,777,216.
[[nodiscard]] inline std::string grouped(int64_t v) {
  const std::string digits = fmt::format("{}", v < 0 ? -v : v);
  std::string out = v < 0 ? "-" : "";
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A whole number as a script would likely have written it: 1e+12 when that is exact and the
// number is large, otherwise every digit, grouped.
[[nodiscard]] inline std::string size_text(double v) {
  if (v >= 1e7 || v <= -1e7) {
    const std::string g = fmt::format("{:g}", v);
    if (std::stod(g) == v || v >= 9.2e18 || v <= -9.2e18) return g;
  }
  return grouped(static_cast<int64_t>(v));
}

}  // namespace perfsim
