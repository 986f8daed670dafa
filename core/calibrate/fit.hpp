// The fitting half of `perfsim calibrate`: measured times in, the tables and link figures the
// cost model reads out. Pure functions with no backend, so tests can feed them synthetic
// measurements and check that known efficiencies, launch costs and links come back.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/calibrate/points.hpp"
#include "core/cost/calibration.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/hardware.hpp"
#include "core/graph/graph.hpp"
#include "core/run/results.hpp"

namespace perfsim {

// The kernel part of a measured per-op time: what is left after the graph-replay gap of each
// of the op's kernel launches (kernel_launches), and never less than a tenth of the
// measurement (a kernel cannot take no time).
[[nodiscard]] double kernel_seconds(double measured_median, double launch_graph, int launches);

// One measured point of a kernel curve: where the curve is read for it (CalibrationPoint::
// curve_seconds: its roofline time at the datasheet peaks, per batched GEMM call where it
// makes several) and the efficiency measured there (roofline seconds / kernel seconds).
struct CurvePoint {
  double seconds = 0;
  double efficiency = 0;
};

// Points of one key sorted by roofline time and merged in log-spaced bins (`bins_per_decade`
// per factor of ten; the median of each bin's x and efficiency), so the curve's x is strictly
// ascending. Throws std::invalid_argument when no point has positive x and efficiency.
[[nodiscard]] EfficiencyCurve fit_curve(std::vector<CurvePoint> points, double bins_per_decade = 4);

// Collects the curve points of measured graphs, by calibration key, and the per-class medians.
class CurveFitter {
 public:
  // Adds every op of `g` that `m` executed, priced on `base` (datasheet peaks, no tables):
  // efficiency = calibration_point(op).roofline_seconds / kernel_seconds(median, launch_graph).
  // GEMMs get curves too ("gemm/fp8/compute"): the cost model reads them only for dtypes
  // without a GEMM table. Copies to or from the host, collectives and host ops are skipped
  // (other sweeps fit them). Each point is also recorded, labelled `source`, with the op's
  // eager median and host issue time from `eager` (the same graph run eagerly) when given.
  void add(const Graph& g, const Measurement& m, const Hardware& base, double launch_graph,
           const std::string& source, const Measurement* eager = nullptr);
  // A point of curve `key` (none when empty) and of `also_key` (its finer curve: an unaligned
  // GEMM's layout, decode attention's rows per K/V row), counted once in the class medians.
  void add_point(const std::string& key, OpClass cls, bool compute_bound, CurvePoint p,
                 const std::string& also_key = {});
  [[nodiscard]] std::map<std::string, EfficiencyCurve> curves() const;
  // Median efficiency per class and bound of every point added (GEMM cells included), the
  // fallback for kinds the sweeps never met.
  [[nodiscard]] std::map<OpClass, double> class_medians(bool compute_bound) const;
  [[nodiscard]] std::size_t point_count() const { return m_points; }
  // The measurements behind the curves and GEMM tables (`perfsim calibrate --points`).
  void record(MeasuredPoint p) { m_log.push_back(std::move(p)); }
  [[nodiscard]] const std::vector<MeasuredPoint>& recorded() const { return m_log; }

 private:
  std::map<std::string, std::vector<CurvePoint>> m_by_key;
  std::map<std::pair<OpClass, bool>, std::vector<double>> m_by_class;
  std::size_t m_points = 0;
  std::vector<MeasuredPoint> m_log;
};

// launch_graph: the median per-op time of a chain of tiny ops replayed from a graph (the eager
// path is fit_dispatch's). Throws std::invalid_argument without a time.
[[nodiscard]] double fit_launch_graph(const std::vector<double>& chain_graph_medians);

// y = intercept + slope · x by least squares weighted by 1 / y² (relative residuals), so small
// sizes fix the intercept as firmly as large ones fix the slope. Needs two distinct x values.
struct LinearFit {
  double intercept = 0;
  double slope = 0;
};
[[nodiscard]] LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

// The host link from pinned uploads measured eagerly: seconds = launch_eager + latency +
// bytes / bandwidth (transfer_time in core/cost/roofline.cpp plus the op's launch); latency clamped >= 0.
[[nodiscard]] Link fit_host_link(const std::vector<double>& bytes, const std::vector<double>& seconds,
                                 double launch_eager);
// Bytes/s of the pageable staging copy: 1 / (slope of the pageable times − 1 / pcie bandwidth);
// 0 (unknown) when pageable copies were not slower per byte.
[[nodiscard]] double fit_host_copy_bandwidth(const std::vector<double>& bytes,
                                             const std::vector<double>& pageable_seconds,
                                             const Link& pcie);

// The measured seconds of a collective at each payload, sorted by payload and made
// non-decreasing (pool-adjacent-violators: a time below a smaller payload's is noise, and
// both take their mean). Throws std::invalid_argument when fewer than two distinct payloads
// were timed or the times do not grow with size.
[[nodiscard]] CollectiveFit fit_collective(Collective c, int group, const std::vector<double>& payload,
                                           const std::vector<double>& seconds);

// Removes from `curves` those a GEMM table of `tables` shadows (gemm/<dtype>/<bound>): a table
// prices its dtype (core/cost/roofline.cpp), so its model-graph GEMM curve would never be read.
void drop_curves_shadowed_by_tables(const std::map<DType, GemmTable>& tables,
                                    std::map<std::string, EfficiencyCurve>& curves);

// GEMM efficiencies measured on an (m, n, k) grid, nullopt where a cell was skipped (over the
// FLOP budget, too large, or not runnable). A skipped cell takes the highest efficiency (at
// most 1) of the measured cells no larger on every axis, else that of the measured cell with
// the most FLOPs. Throws std::invalid_argument when no cell was measured.
[[nodiscard]] GemmTable fill_gemm_table(std::vector<double> m, std::vector<double> n, std::vector<double> k,
                                        const std::vector<std::optional<double>>& measured);

}  // namespace perfsim
