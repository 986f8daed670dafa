// Fitting a profile again from saved calibration points (`perfsim calibrate --points` CSV),
// without the device: `perfsim calibrate --merge`. One calibration is one draw of its
// measurements; pooling the points of several calibrations of a device averages that draw.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"

namespace perfsim {

// One row of a points file: what the fit needs of it.
struct SavedPoint {
  std::string source;     // "gemm bf16 grid" marks a GEMM table cell
  std::string key;        // the curve it feeds ("" for none)
  std::string finer_key;  // and its finer curve ("" for none)
  std::string dtype;
  int64_t m = 0, n = 0, k = 0;
  // The op's shape and traffic where the file has them (0 otherwise): what
  // update_saved_points reads.
  int64_t batch = 0, rows = 0, cols = 0, seq_q = 0, heads = 0, kv_heads = 0;
  double bytes = 0;
  double curve_seconds = 0;
  double efficiency = 0;
  [[nodiscard]] bool grid_cell() const;
};

// Parses a points CSV (header row, RFC 4180 quoting). `file` names it in errors, which say the
// line and what is wrong; throws ConfigError.
[[nodiscard]] std::vector<SavedPoint> read_points_csv(const std::string& text, const std::string& file);

// What update_saved_points changed in points written by an earlier version of the cost model.
struct PointUpdates {
  std::size_t rekeyed = 0;        // one-sequence KV appends and slices given their contiguous-copy curve
  std::size_t cross_entropy = 0;  // cross-entropy points given the curve of their kernel path
  std::size_t skinny_gemms = 0;   // unaligned GEMMs of at most skinny_gemm_rows rows given their skinny curve
  std::size_t quantized_rows = 0; // fused quantized GEMMs given the curve of their rows (quantized_rows_variant)
  std::size_t repriced = 0;       // embeddings priced with each learned-position row once
  std::size_t varlen_rows = 0;    // varlen decode attention given the curve of its GQA group
};

// Brings points written by an earlier version of the cost model up to date, recognized by what
// they hold (so points of this version pass unchanged):
// - a KV append into a contiguous cache or a last-token slice of one sequence with no finer key
//   gets its contiguous-copy curve (copy_rows_variant);
// - a cross-entropy point with no finer key gets the curve of the kernel path its row length
//   and dtype take (cross_entropy_variant);
// - an unaligned GEMM of at most skinny_gemm_rows rows keyed to its layout curve gets that
//   curve's skinny one (gemm_layout_variant);
// - an embedding whose bytes count a learned-position row per token (ids + 3 rows of
//   `cols` per token) counts each of its seq_q position rows once (op_bytes): its roofline and
//   efficiency scale by the new bytes over the old;
// - a varlen decode attention point with no finer key gets the curve of its GQA group
//   (varlen_rows_variant).
void update_saved_points(std::vector<SavedPoint>& points, PointUpdates& updates);

struct MergeSummary {
  int files = 0;
  std::size_t points = 0;      // rows read, GEMM cells included
  std::size_t curves = 0;      // kernel curves fitted from the points
  std::size_t kept_curves = 0; // the base profile's curves no point fed, kept as they were
  std::size_t cells = 0;       // GEMM table cells measured in at least one file
  std::size_t filled = 0;      // the tables' other cells, filled from those as calibrate fills
  PointUpdates updated;        // points of an earlier cost model brought up to date
};

// `base` with its kernel curves fitted from the pooled points of every file (by curve key and
// finer key, as `perfsim calibrate` fits them), and each GEMM table's cells set to the median
// efficiency the files measured for them. A cell no file measured is filled from the measured
// ones as calibrate fills a cell past its budget, so the files should come from calibrations of
// the profile's own plan (full or quick): the profile's values of such cells are not kept.
// Everything else (launch, host dispatch and link, collectives, class efficiencies) is the
// base's. The points are first brought up to date (update_saved_points). Throws ConfigError
// when no file holds a point.
[[nodiscard]] Hardware merge_calibrations(const Hardware& base, std::vector<std::vector<SavedPoint>> files,
                                          MergeSummary& summary);

}  // namespace perfsim
