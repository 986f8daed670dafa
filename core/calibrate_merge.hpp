// Fitting a profile again from saved calibration points (`perfsim calibrate --points` CSV),
// without the device: `perfsim calibrate --merge`. One calibration is one draw of its
// measurements; pooling the points of several calibrations of a device averages that draw.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/hardware.hpp"

namespace perfsim {

// One row of a points file: what the fit needs of it.
struct SavedPoint {
  std::string source;     // "gemm bf16 grid" marks a GEMM table cell
  std::string key;        // the curve it feeds ("" for none)
  std::string finer_key;  // and its finer curve ("" for none)
  std::string dtype;
  int64_t m = 0, n = 0, k = 0;
  double curve_seconds = 0;
  double efficiency = 0;
  [[nodiscard]] bool grid_cell() const;
};

// Parses a points CSV (header row, RFC 4180 quoting). `file` names it in errors, which say the
// line and what is wrong; throws ConfigError.
[[nodiscard]] std::vector<SavedPoint> read_points_csv(const std::string& text, const std::string& file);

struct MergeSummary {
  int files = 0;
  std::size_t points = 0;      // rows read, GEMM cells included
  std::size_t curves = 0;      // kernel curves fitted from the points
  std::size_t kept_curves = 0; // the base profile's curves no point fed, kept as they were
  std::size_t cells = 0;       // GEMM table cells measured in at least one file
  std::size_t filled = 0;      // the tables' other cells, filled from those as calibrate fills
};

// `base` with its kernel curves fitted from the pooled points of every file (by curve key and
// finer key, as `perfsim calibrate` fits them), and each GEMM table's cells set to the median
// efficiency the files measured for them. A cell no file measured is filled from the measured
// ones as calibrate fills a cell past its budget, so the files should come from calibrations of
// the profile's own plan (full or quick): the profile's values of such cells are not kept.
// Everything else (launch, host dispatch and link, collectives, class efficiencies) is the
// base's. Throws ConfigError when no file holds a point.
[[nodiscard]] Hardware merge_calibrations(const Hardware& base, const std::vector<std::vector<SavedPoint>>& files,
                                          MergeSummary& summary);

}  // namespace perfsim
