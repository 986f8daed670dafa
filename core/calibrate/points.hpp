// The measurements behind a calibrated profile, one row per timed op: what `perfsim calibrate
// --points FILE` writes, so a curve can be traced back to the shapes and times it was fitted on.
#pragma once
#include <string>
#include <vector>

#include "core/cost/roofline.hpp"
#include "core/graph/graph.hpp"

namespace perfsim {

struct MeasuredPoint {
  std::string source;        // "gemm fp32 grid", "cal-gpt-1280 train 2x768 +bf16"
  Op op;                     // name, kind, dtype and shape attributes
  CalibrationPoint curve;    // the curve (and finer / fallback curves) the point feeds
  double flops = 0;
  double bytes = 0;
  double measured_seconds = 0;  // median per-op time
  double kernel_seconds = 0;    // after the graph-replay gap (kernel_seconds())
  double efficiency = 0;        // roofline seconds / kernel seconds
  // Cases also run eagerly (the launch fit's pairs): the op's eager median and the host
  // seconds spent issuing it; 0 where not run eagerly.
  double eager_seconds = 0;
  double host_seconds = 0;
};

// CSV with a header row: source, op, kind, dtype, curve keys, bound, the shape attributes
// (m n k batch heads kv_heads head_dim seq_q seq_kv kv_block rows cols elements), flops,
// bytes, roofline_s, curve_s (where the curve is read), measured_s, kernel_s, efficiency,
// eager_s, host_s (empty when not run
// eagerly). Seconds and bytes, RFC 4180 quoting.
[[nodiscard]] std::string points_to_csv(const std::vector<MeasuredPoint>& points);

}  // namespace perfsim
