// Fitting measured times into efficiency curves, GEMM tables, launch costs and alpha-beta
// links, exactly at the points the cost model reads them (core/cost/roofline.hpp calibration_point).
#include "core/calibrate/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/cost/roofline.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/statistics.hpp"

namespace perfsim {


double kernel_seconds(double measured_median, double launch_graph, int launches) {
  return std::max(measured_median - launch_graph * std::max(1, launches), 0.1 * measured_median);
}

EfficiencyCurve fit_curve(std::vector<CurvePoint> points, double bins_per_decade) {
  std::erase_if(points, [](const CurvePoint& p) {
    return !(p.seconds > 0) || !(p.efficiency > 0) || !std::isfinite(p.efficiency);
  });
  if (points.empty()) throw std::invalid_argument("fit_curve: no point with positive time and efficiency");
  std::sort(points.begin(), points.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.seconds < b.seconds; });
  // Bins of equal width in log10(x), anchored at the smallest point.
  const double x0 = std::log10(points.front().seconds);
  EfficiencyCurve c;
  std::vector<double> xs, es;
  long bin = 0;
  auto flush = [&] {
    if (xs.empty()) return;
    const double x = median_or_zero(xs);
    if (!c.seconds.empty() && !(x > c.seconds.back())) {
      // Medians of neighbouring bins can coincide only for identical x: merge into the last.
      c.efficiency.back() = std::sqrt(c.efficiency.back() * median_or_zero(es));
    } else {
      c.seconds.push_back(x);
      c.efficiency.push_back(median_or_zero(es));
    }
    xs.clear();
    es.clear();
  };
  for (const CurvePoint& p : points) {
    const auto b = static_cast<long>(std::floor((std::log10(p.seconds) - x0) * bins_per_decade));
    if (b != bin) flush(), bin = b;
    xs.push_back(p.seconds);
    es.push_back(p.efficiency);
  }
  flush();
  return c;
}

void CurveFitter::add_point(const std::string& key, OpClass cls, bool compute_bound, CurvePoint p,
                            const std::string& also_key) {
  if (!(p.seconds > 0) || !(p.efficiency > 0) || !std::isfinite(p.efficiency)) return;
  if (!key.empty()) m_by_key[key].push_back(p);
  if (!also_key.empty()) m_by_key[also_key].push_back(p);
  m_by_class[{cls, compute_bound}].push_back(p.efficiency);
  ++m_points;
}

void CurveFitter::add(const Graph& g, const Measurement& m, const Hardware& base, double launch_graph,
                      const std::string& source, const Measurement* eager) {
  for (std::size_t i = 0; i < g.ops.size() && i < m.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const OpMeasurement& om = m.ops[i];
    if (!om.executed || !(om.median > 0)) continue;
    if (op.kind == OpKind::collective || op.kind == OpKind::host || host_side(op, g) != nullptr)
      continue;
    const OpCost cost = predict_op(op, g, base);
    const CalibrationPoint p = calibration_point(op, cost, base);
    const double kernel = kernel_seconds(om.median, launch_graph, kernel_launches(op));
    const CurvePoint pt{p.curve_seconds, p.roofline_seconds / kernel};
    // An unaligned GEMM also feeds the curve of its layout, decode attention that of its rows.
    add_point(p.key, class_of(op.kind), p.compute_bound, pt, p.finer_key);
    MeasuredPoint rec{source, op, p, cost.flops, cost.bytes, om.median, kernel, pt.efficiency};
    if (eager != nullptr && i < eager->ops.size() && eager->ops[i].executed) {
      rec.eager_seconds = eager->ops[i].median;
      rec.host_seconds = eager->ops[i].host;
    }
    record(std::move(rec));
  }
}

std::map<std::string, EfficiencyCurve> CurveFitter::curves() const {
  std::map<std::string, EfficiencyCurve> out;
  for (const auto& [key, pts] : m_by_key) out.emplace(key, fit_curve(pts));
  return out;
}

std::map<OpClass, double> CurveFitter::class_medians(bool compute_bound) const {
  std::map<OpClass, double> out;
  for (const auto& [k, effs] : m_by_class)
    if (k.second == compute_bound) out[k.first] = median_or_zero(effs);
  return out;
}

double fit_launch_graph(const std::vector<double>& chain_graph_medians) {
  if (chain_graph_medians.empty()) throw std::invalid_argument("fit_launch_graph: no launch-chain times");
  return median_or_zero(chain_graph_medians);
}

LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) throw std::invalid_argument("fit_line: need two or more (x, y) pairs");
  // Weighted normal equations: minimise Σ w (a + b x − y)², w = 1 / y².
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double w = y[i] != 0 ? 1.0 / (y[i] * y[i]) : 1.0;
    sw += w;
    sx += w * x[i];
    sy += w * y[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  const double det = sw * sxx - sx * sx;
  if (!(std::abs(det) > 0)) throw std::invalid_argument("fit_line: the x values do not differ");
  LinearFit f;
  f.slope = (sw * sxy - sx * sy) / det;
  f.intercept = (sy - f.slope * sx) / sw;
  return f;
}

Link fit_host_link(const std::vector<double>& bytes, const std::vector<double>& seconds, double launch_eager) {
  const LinearFit f = fit_line(bytes, seconds);
  if (!(f.slope > 0)) throw std::invalid_argument("fit_host_link: copy times do not grow with size");
  return Link{1.0 / f.slope, std::max(0.0, f.intercept - launch_eager)};
}

double fit_host_copy_bandwidth(const std::vector<double>& bytes, const std::vector<double>& pageable_seconds,
                               const Link& pcie) {
  const LinearFit f = fit_line(bytes, pageable_seconds);
  const double extra = f.slope - (pcie.bandwidth > 0 ? 1.0 / pcie.bandwidth : 0.0);
  return extra > 0 ? 1.0 / extra : 0.0;
}

CollectiveFit fit_collective(Collective c, int group, const std::vector<double>& payload,
                             const std::vector<double>& seconds) {
  if (payload.size() != seconds.size())
    throw std::invalid_argument(fmt::format("fit_collective: {} payloads for {} times", payload.size(), seconds.size()));
  std::vector<std::pair<double, double>> points;
  for (std::size_t i = 0; i < payload.size(); ++i) points.emplace_back(payload[i], seconds[i]);
  std::sort(points.begin(), points.end());
  // One entry per distinct payload (a repeated one weighs as many times as it was timed), then
  // pool adjacent violators: a block's entries share its weighted mean, and a block whose mean
  // falls below the one before it merges into it.
  struct Block {
    std::size_t first, last;  // entries [first, last]
    double sum;               // of the times
    double count;             // times summed
    [[nodiscard]] double mean() const { return sum / count; }
  };
  CollectiveFit f;
  std::vector<Block> blocks;
  for (const auto& [p, t] : points) {
    if (!f.payload.empty() && f.payload.back() == p) {
      blocks.back().sum += t;
      blocks.back().count += 1;
    } else {
      f.payload.push_back(p);
      blocks.push_back({f.payload.size() - 1, f.payload.size() - 1, t, 1});
    }
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean() > blocks.back().mean()) {
      Block& prev = blocks[blocks.size() - 2];
      prev.last = blocks.back().last;
      prev.sum += blocks.back().sum;
      prev.count += blocks.back().count;
      blocks.pop_back();
    }
  }
  f.seconds.resize(f.payload.size());
  for (const Block& b : blocks)
    for (std::size_t i = b.first; i <= b.last; ++i) f.seconds[i] = b.mean();
  if (f.payload.size() < 2 || !(f.seconds.back() > f.seconds.front()))
    throw std::invalid_argument(fmt::format("fit_collective: {} times over {} ranks do not grow with size",
                                            name_of(c), group));
  return f;
}

void drop_curves_shadowed_by_tables(const std::map<DType, GemmTable>& tables,
                                    std::map<std::string, EfficiencyCurve>& curves) {
  for (const auto& [t, table] : tables)
    for (const char* bound : {"compute", "memory"}) curves.erase(fmt::format("gemm/{}/{}", name_of(t), bound));
}

GemmTable fill_gemm_table(std::vector<double> m, std::vector<double> n, std::vector<double> k,
                          const std::vector<std::optional<double>>& measured) {
  GemmTable t;
  t.m = std::move(m);
  t.n = std::move(n);
  t.k = std::move(k);
  const std::size_t nm = t.m.size(), nn = t.n.size(), nk = t.k.size();
  if (measured.size() != nm * nn * nk)
    throw std::invalid_argument(fmt::format("fill_gemm_table: {} cells for a {}x{}x{} grid", measured.size(), nm, nn, nk));
  auto at = [&](std::size_t i, std::size_t j, std::size_t l) { return measured[(i * nn + j) * nk + l]; };
  auto flops = [&](std::size_t i, std::size_t j, std::size_t l) { return t.m[i] * t.n[j] * t.k[l]; };
  // The largest measured cell overall: the fallback when nothing smaller was measured.
  std::optional<double> largest;
  double largest_flops = -1;
  for (std::size_t i = 0; i < nm; ++i)
    for (std::size_t j = 0; j < nn; ++j)
      for (std::size_t l = 0; l < nk; ++l)
        if (at(i, j, l) && flops(i, j, l) > largest_flops) largest = at(i, j, l), largest_flops = flops(i, j, l);
  if (!largest) throw std::invalid_argument("fill_gemm_table: no GEMM cell was measured");
  t.efficiency.assign(nm * nn * nk, 0.0);
  for (std::size_t i = 0; i < nm; ++i)
    for (std::size_t j = 0; j < nn; ++j)
      for (std::size_t l = 0; l < nk; ++l) {
        if (const auto v = at(i, j, l)) {
          t.cell(i, j, l) = *v;
          continue;
        }
        // A GEMM no smaller on any axis reaches at least the efficiency of each measured
        // one below it (more work per tile, as many tiles or more): the best of them. The most
        // FLOPs alone is a worse guess: a 163840 x 1280 GEMV streams less efficiently than a
        // 40960 x 2560 one, and large-vocabulary lm_heads were priced from the former. An
        // efficiency above 1 (faster than the datasheet roofline) is a mistimed cell, never a bound.
        std::optional<double> best;
        for (std::size_t a = 0; a <= i; ++a)
          for (std::size_t b = 0; b <= j; ++b)
            for (std::size_t c = 0; c <= l; ++c)
              if (const auto v = at(a, b, c); v && *v <= 1.0 && (!best || *v > *best)) best = v;
        t.cell(i, j, l) = best.value_or(*largest);
      }
  return t;
}

}  // namespace perfsim
