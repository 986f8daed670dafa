// read_points_csv and merge_calibrations (merge.hpp).
#include "core/calibrate/merge.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "core/calibrate/fit.hpp"
#include "core/cost/calibration.hpp"
#include "core/cost/kernel_paths.hpp"
#include "core/errors.hpp"
#include "core/graph/op_kind.hpp"
#include "core/config/dtype.hpp"
#include "core/statistics.hpp"
#include "core/text.hpp"

namespace perfsim {

bool SavedPoint::grid_cell() const {
  constexpr std::string_view suffix = " grid";
  return source.size() > suffix.size() && source.compare(source.size() - suffix.size(), suffix.size(), suffix) == 0;
}

namespace {

double number(const std::string& s) {
  double v = 0;
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  if (r.ec != std::errc{} || r.ptr != end) throw std::invalid_argument(s);
  return v;
}

}  // namespace

std::vector<SavedPoint> read_points_csv(const std::string& text, const std::string& file) {
  auto fail = [&](std::size_t line, const std::string& what) {
    return ConfigError(fmt::format("{}:{}: {}", file, line, what));
  };
  std::vector<SavedPoint> out;
  std::map<std::string, std::size_t> column;
  const char* const needed[] = {"source", "key", "finer_key", "dtype", "m", "n", "k", "curve_s", "efficiency"};
  std::size_t line_no = 0, begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    begin = end + 1;
    ++line_no;
    if (line.empty()) continue;
    const auto fields = split_csv_line(line);
    if (!fields) throw fail(line_no, "a quoted field does not end on its line");
    if (column.empty()) {
      for (std::size_t i = 0; i < fields->size(); ++i) column[(*fields)[i]] = i;
      for (const char* name : needed)
        if (!column.count(name))
          throw fail(line_no, fmt::format("the header has no '{}' column; is this a file written by 'perfsim "
                                          "calibrate --points'?",
                                          name));
      continue;
    }
    if (fields->size() != column.size())
      throw fail(line_no, fmt::format("{} fields where the header names {}", fields->size(), column.size()));
    const auto field = [&](const char* name) -> const std::string& { return (*fields)[column.at(name)]; };
    SavedPoint p;
    p.source = field("source");
    p.key = field("key");
    p.finer_key = field("finer_key");
    p.dtype = field("dtype");
    const char* current = "m";
    // Columns a file may lack (a hand-written one): read as 0.
    const auto optional = [&](const char* name) { return column.count(name) ? number(field(current = name)) : 0.0; };
    try {
      p.m = static_cast<int64_t>(number(field(current = "m")));
      p.n = static_cast<int64_t>(number(field(current = "n")));
      p.k = static_cast<int64_t>(number(field(current = "k")));
      p.curve_seconds = number(field(current = "curve_s"));
      p.efficiency = number(field(current = "efficiency"));
      p.batch = static_cast<int64_t>(optional("batch"));
      p.rows = static_cast<int64_t>(optional("rows"));
      p.cols = static_cast<int64_t>(optional("cols"));
      p.seq_q = static_cast<int64_t>(optional("seq_q"));
      p.heads = static_cast<int64_t>(optional("heads"));
      p.kv_heads = static_cast<int64_t>(optional("kv_heads"));
      p.bytes = optional("bytes");
    } catch (const std::invalid_argument&) {
      throw fail(line_no, fmt::format("column '{}' is not a number: '{}'", current, field(current)));
    }
    out.push_back(std::move(p));
  }
  if (column.empty()) throw fail(1, "empty file: no header row");
  return out;
}

namespace {

// The op kind a curve key names ("kv_append/bf16/memory" -> kv_append).
std::optional<OpKind> kind_of_key(std::string_view key) { return parse_op_kind(key.substr(0, key.find('/'))); }

// The op a point was taken from, as far as its curve variant depends on it. Keys name the
// kind's calibration_family; a paged curve's point came from the family's paged kind.
Op variant_probe(const SavedPoint& p, OpKind kind) {
  Op op;
  op.kind = kind;
  op.dtype = parse_dtype(p.dtype).value_or(DType::fp32);
  op.attrs.batch = p.batch;
  op.attrs.rows = p.rows;
  op.attrs.cols = p.cols;
  if (const std::optional<OpKind> paged = paged_kind_of(kind); paged && p.key.ends_with("/paged")) {
    op.kind = *paged;
    op.attrs.kv_block = 1;
  }
  return op;
}

}  // namespace

void update_saved_points(std::vector<SavedPoint>& points, PointUpdates& updates) {
  for (SavedPoint& p : points) {
    const std::optional<OpKind> kind = kind_of_key(p.key);
    if (!kind) continue;
    // The engine's varlen decode attention per GQA group (varlen_rows_variant).
    if (*kind == OpKind::flash_attention && p.finer_key.empty() && p.heads > 0) {
      constexpr std::string_view fp8 = "_fp8kv";
      const bool on_fp8 = p.key.ends_with(fp8);
      const std::string_view base = std::string_view(p.key).substr(0, p.key.size() - (on_fp8 ? fp8.size() : 0));
      if (base.ends_with("/varlen_decode")) {
        Op op;
        op.kind = OpKind::varlen_flash_attention;
        op.attrs.seq_q = 1;
        op.attrs.heads = p.heads;
        op.attrs.kv_heads = p.kv_heads;
        const std::string rows = varlen_rows_variant(op);
        p.finer_key = std::string(base.substr(0, base.rfind('/') + 1)) + (on_fp8 ? fp8_kv_variant(rows) : rows);
        ++updates.varlen_rows;
        continue;
      }
    }
    // An fp8 KV cache's appends quantize each row: no contiguous-copy curve of theirs.
    if (p.key.find("fp8kv") != std::string::npos) continue;
    const Op probe = variant_probe(p, *kind);
    if (const std::string v = copy_rows_variant(probe); !v.empty() && p.finer_key.empty()) {
      p.finer_key = p.key + "/" + v;
      ++updates.rekeyed;
      continue;
    }
    if (const std::string v = cross_entropy_variant(probe); !v.empty() && p.finer_key.empty()) {
      p.finer_key = p.key + "/" + v;
      ++updates.cross_entropy;
      continue;
    }
    const int64_t gemm_rows = p.m * std::max<int64_t>(p.batch, 1);
    // A fused quantized GEMM's kernel per rows of A (quantized_rows_variant).
    if (*kind == OpKind::gemm && p.finer_key.empty() && (p.key.ends_with("/int4w") || p.key.ends_with("/int8w")) &&
        gemm_rows > 0 && gemm_rows <= quantized_fused_rows) {
      p.finer_key = p.key + "_r" + std::to_string(quantized_rows_class(gemm_rows));
      ++updates.quantized_rows;
      continue;
    }
    if (*kind == OpKind::gemm && p.finer_key.find("/unaligned_") != std::string::npos &&
        !p.finer_key.ends_with("_skinny") && gemm_rows > 0 && gemm_rows <= skinny_gemm_rows) {
      p.finer_key += "_skinny";
      ++updates.skinny_gemms;
      continue;
    }
    if (*kind != OpKind::embedding || !(p.rows > p.seq_q && p.seq_q > 0)) continue;
    const std::optional<DType> t = parse_dtype(p.dtype);
    if (!t) continue;
    const double row = static_cast<double>(p.cols) * bytes_of(*t), rows = static_cast<double>(p.rows);
    const double per_token = 4.0 * rows + 3.0 * rows * row;  // int32 ids, table row, position row, output
    // Files print 6 significant digits; the two counts differ by a sixth or more.
    if (std::abs(p.bytes - per_token) > 1e-4 * per_token) continue;  // no positions, or counted once
    const double now = p.bytes - (rows - static_cast<double>(p.seq_q)) * row;
    p.curve_seconds *= now / p.bytes;
    p.efficiency *= now / p.bytes;
    p.bytes = now;
    ++updates.repriced;
  }
}

namespace {

// The GEMM table of `base` with its cells set to the median of what the files measured there.
// Returns nullopt when no file measured a cell of it.
std::optional<GemmTable> merged_table(DType t, const GemmTable& base, const std::vector<std::vector<SavedPoint>>& files,
                                      std::size_t& cells, std::size_t& filled) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<double>> measured;
  for (const std::vector<SavedPoint>& f : files)
    for (const SavedPoint& p : f)
      if (p.grid_cell() && p.dtype == name_of(t) && p.efficiency > 0) measured[{p.m, p.n, p.k}].push_back(p.efficiency);
  std::vector<std::optional<double>> grid;
  grid.reserve(base.efficiency.size());
  std::size_t found = 0;
  for (double m : base.m)
    for (double n : base.n)
      for (double k : base.k) {
        const auto it = measured.find({static_cast<int64_t>(m), static_cast<int64_t>(n), static_cast<int64_t>(k)});
        if (it == measured.end()) {
          grid.emplace_back();
          continue;
        }
        grid.emplace_back(median_or_zero(it->second));
        ++found;
      }
  if (found == 0) return std::nullopt;
  cells += found;
  filled += grid.size() - found;
  return fill_gemm_table(base.m, base.n, base.k, grid);
}

}  // namespace

Hardware merge_calibrations(const Hardware& base, std::vector<std::vector<SavedPoint>> files,
                            MergeSummary& summary) {
  summary = MergeSummary{};
  summary.files = static_cast<int>(files.size());
  for (std::vector<SavedPoint>& f : files) update_saved_points(f, summary.updated);
  std::map<std::string, std::vector<CurvePoint>> by_key;
  for (const std::vector<SavedPoint>& f : files)
    for (const SavedPoint& p : f) {
      ++summary.points;
      // Table cells price their dtype through the table; the curves come from every other point.
      if (p.grid_cell() || !(p.curve_seconds > 0) || !(p.efficiency > 0)) continue;
      if (!p.key.empty()) by_key[p.key].push_back({p.curve_seconds, p.efficiency});
      if (!p.finer_key.empty()) by_key[p.finer_key].push_back({p.curve_seconds, p.efficiency});
    }
  if (summary.points == 0) throw ConfigError("calibrate --merge: the points files hold no point");

  Hardware hw = base;
  for (auto& [t, table] : hw.calibration.gemm)
    if (std::optional<GemmTable> merged = merged_table(t, table, files, summary.cells, summary.filled)) table = std::move(*merged);
  std::map<std::string, EfficiencyCurve> fitted;
  for (const auto& [key, points] : by_key) fitted.emplace(key, fit_curve(points));
  drop_curves_shadowed_by_tables(hw.calibration.gemm, fitted);
  for (const auto& [key, curve] : base.calibration.kernels) summary.kept_curves += fitted.count(key) ? 0 : 1;
  summary.curves = fitted.size();
  for (auto& [key, curve] : fitted) hw.calibration.kernels[key] = std::move(curve);
  // Reports print the mode beside the device and date ("full, 2 calibrations merged").
  const std::string& base_mode = base.calibration.measured_on.mode;
  const std::string mode = base_mode.empty() ? "full" : base_mode.substr(0, base_mode.find(','));
  hw.calibration.measured_on.mode =
      files.size() == 1 ? mode + ", refitted from saved points" : fmt::format("{}, {} calibrations merged", mode, files.size());
  hw.source = fmt::format("perfsim calibrate --merge of {} points files ({} points) over {}", files.size(),
                          summary.points, base.source.empty() ? base.name : base.source);
  return hw;
}

}  // namespace perfsim
