// Figures as text, shared by every printer: reports, calibration and validation logs, the
// CLI's catalogs.
#pragma once
#include <string>

namespace perfsim {

// Adaptive seconds (µs/ms/s), binary bytes (KiB..TiB), 3 significant
// digits. Missing values print as "—".
[[nodiscard]] std::string format_duration(double seconds);
[[nodiscard]] std::string format_bytes(double bytes);
[[nodiscard]] std::string format_signed_percent(double ratio);   // 0.123 -> "+12.3%"
[[nodiscard]] std::string format_speedup(double ratio);          // 2.5 -> "2.50×"
[[nodiscard]] std::string format_rate(double per_second);        // 1234.5 -> "1,235"
[[nodiscard]] std::string format_sig3(double v);                 // 3 significant digits
[[nodiscard]] std::string format_flops_rate(double per_second);  // 1.29e14 -> "129 TFLOP/s"

}  // namespace perfsim
