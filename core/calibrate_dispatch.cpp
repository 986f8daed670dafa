// fit_dispatch(): the eager launch path fitted through the host-paced timeline.
#include "core/calibrate_dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/calibrate_fit.hpp"
#include "core/cost_model.hpp"
#include "core/op_metrics.hpp"

namespace perfsim {

namespace {

bool usable(const EagerCase& c, std::size_t i) {
  return c.graph.ops[i].kind != OpKind::host && c.graph_medians[i] > 0 && c.eager_medians[i] > 0;
}

class Objective {
 public:
  explicit Objective(const std::vector<EagerCase>& cases) : m_cases(cases) {}

  // Summed |log error| of ops and steps for an extra gap and per-kind dispatch.
  [[nodiscard]] double operator()(double gap, const std::map<OpKind, double>& dispatch) const {
    double total = 0;
    for (const EagerCase& c : m_cases) {
      const std::size_t n = c.graph.ops.size();
      std::vector<double> device(n), issue(n);
      for (std::size_t i = 0; i < n; ++i) {
        const Op& op = c.graph.ops[i];
        device[i] = c.graph_medians[i] > 0 ? c.graph_medians[i] + gap : 0.0;
        const auto it = dispatch.find(op.kind);
        issue[i] = op.kind == OpKind::host || it == dispatch.end() ? 0.0 : it->second * kernel_launches(op);
      }
      const std::vector<double> waits = host_paced_waits(c.graph, device, issue);
      double predicted_step = 0, measured_step = 0;
      std::size_t ops = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (!usable(c, i)) continue;
        const double predicted = device[i] + waits[i];
        total += std::abs(std::log(predicted / c.eager_medians[i]));
        predicted_step += predicted * c.graph.ops[i].count;
        measured_step += c.eager_medians[i] * c.graph.ops[i].count;
        ++ops;
      }
      if (ops > 0) total += static_cast<double>(ops) * std::abs(std::log(predicted_step / measured_step));
    }
    return total;
  }

  // Relative error of each case's eager step, for the report.
  [[nodiscard]] std::vector<double> step_errors(double gap, const std::map<OpKind, double>& dispatch) const {
    std::vector<double> out;
    for (const EagerCase& c : m_cases) {
      const std::size_t n = c.graph.ops.size();
      std::vector<double> device(n), issue(n);
      for (std::size_t i = 0; i < n; ++i) {
        device[i] = c.graph_medians[i] > 0 ? c.graph_medians[i] + gap : 0.0;
        const auto it = dispatch.find(c.graph.ops[i].kind);
        issue[i] = c.graph.ops[i].kind == OpKind::host || it == dispatch.end()
                       ? 0.0
                       : it->second * kernel_launches(c.graph.ops[i]);
      }
      const std::vector<double> waits = host_paced_waits(c.graph, device, issue);
      double p = 0, m = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (usable(c, i)) {
          p += (device[i] + waits[i]) * c.graph.ops[i].count;
          m += c.eager_medians[i] * c.graph.ops[i].count;
        }
      if (m > 0) out.push_back(p / m - 1);
    }
    return out;
  }

 private:
  const std::vector<EagerCase>& m_cases;
};

// Candidate values for a coordinate: `steps` points from lo to hi, geometric (host costs
// range from a microsecond to tens of microseconds).
std::vector<double> candidates(double lo, double hi, int steps) {
  std::vector<double> v;
  for (int i = 0; i < steps; ++i) v.push_back(lo * std::pow(hi / lo, double(i) / (steps - 1)));
  return v;
}

}  // namespace

DispatchFit fit_dispatch(const std::vector<EagerCase>& cases, double launch_graph) {
  std::map<OpKind, std::vector<double>> host_by_kind;
  bool any = false;
  for (const EagerCase& c : cases) {
    const std::size_t n = c.graph.ops.size();
    if (c.graph_medians.size() != n || c.eager_medians.size() != n ||
        (!c.host_medians.empty() && c.host_medians.size() != n))
      throw std::invalid_argument("fit_dispatch: per-op medians do not match the graph");
    for (std::size_t i = 0; i < n; ++i) {
      if (!usable(c, i)) continue;
      any = true;
      // Per kernel launched: an op that launches several pays its dispatch for each.
      if (!c.host_medians.empty() && c.host_medians[i] > 0)
        host_by_kind[c.graph.ops[i].kind].push_back(c.host_medians[i] / kernel_launches(c.graph.ops[i]));
    }
  }
  if (!any) throw std::invalid_argument("fit_dispatch: no op measured both ways");

  DispatchFit fit;
  for (const auto& [k, times] : host_by_kind) fit.by_kind[k] = median_value(times);
  const Objective objective(cases);
  double gap = 0, best = objective(0, fit.by_kind);
  for (double g : candidates(0.05e-6, 20e-6, 96))
    if (const double f = objective(g, fit.by_kind); f < best) best = f, gap = g;

  fit.launch_eager = launch_graph + gap;
  std::vector<double> values;
  for (const auto& [k, v] : fit.by_kind) values.push_back(v);
  fit.dispatch_eager = median_value(values);
  std::vector<double> errs = objective.step_errors(gap, fit.by_kind);
  for (double& e : errs) e = std::abs(e);
  fit.step_error = median_value(errs);
  return fit;
}

}  // namespace perfsim
