// Units for text output (see units.hpp).
#include "core/units.hpp"

#include <cmath>

#include <fmt/format.h>

namespace perfsim {

std::string format_sig3(double v) {
  if (!std::isfinite(v)) return "—";
  const double a = std::fabs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "—";
  const double a = std::fabs(seconds);
  if (a == 0) return "0 s";
  if (a < 1e-3) return format_sig3(seconds * 1e6) + " µs";
  if (a < 1) return format_sig3(seconds * 1e3) + " ms";
  return format_sig3(seconds) + " s";
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "—";
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = bytes;
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 5) v /= 1024, ++u;
  if (u == 0) return fmt::format("{:.0f} B", v);
  return format_sig3(v) + " " + units[u];
}

std::string format_signed_percent(double ratio) {
  if (!std::isfinite(ratio)) return "—";
  // Below the printed resolution the sign means nothing ("-0.0%" would read as an error).
  if (std::fabs(ratio) < 0.0005) return "0.0%";
  return fmt::format("{:+.1f}%", ratio * 100);
}

std::string format_speedup(double ratio) {
  if (!std::isfinite(ratio)) return "—";
  return format_sig3(ratio) + "×";
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second)) return "—";
  if (std::fabs(per_second) < 100) return format_sig3(per_second);
  // Whole numbers with thousands separators: "12,345".
  std::string digits = fmt::format("{:.0f}", std::fabs(per_second));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return per_second < 0 ? "-" + out : out;
}

std::string format_flops_rate(double per_second) {
  if (!std::isfinite(per_second)) return "—";
  static constexpr const char* units[] = {"FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"};
  double v = per_second;
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 5) v /= 1000, ++u;
  return format_sig3(v) + " " + units[u];
}

}  // namespace perfsim
