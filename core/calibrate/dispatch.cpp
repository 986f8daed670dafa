// fit_dispatch(): the eager launch path fitted through the host-paced timeline.
#include "core/calibrate/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/calibrate/fit.hpp"
#include "core/cost/cost_model.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/statistics.hpp"

namespace perfsim {

namespace {

bool usable(const EagerCase& c, std::size_t i) {
  return c.graph.ops[i].kind != OpKind::host && c.graph_medians[i] > 0 && c.eager_medians[i] > 0;
}

// The host's issue of one op: fixed + per kernel × kernels launched (nothing for unknown kinds).
// Fitted per calibration_family, as profiles key dispatch.
HostIssue issue_of(const Op& op, const DispatchFit& d) {
  const OpKind family = calibration_family(op.kind);
  const auto per = d.by_kind.find(family);
  if (op.kind == OpKind::host || per == d.by_kind.end()) return HostIssue{0, 0, 1};
  const auto fixed = d.fixed_by_kind.find(family);
  return HostIssue{fixed == d.fixed_by_kind.end() ? 0.0 : fixed->second, per->second, kernel_launches(op)};
}

// The eager launch's two device costs: `queued` on every eager kernel, `wait` more on a
// kernel the device sits idle for.
struct EagerLaunch {
  double queued = 0;
  double wait = 0;
};

// The eager per-op times the host-paced timeline predicts for one case: graph median + the
// queued cost, plus the wait for the host's issue (each launch seen `wait` after it).
std::vector<double> predict_case(const EagerCase& c, EagerLaunch launch, const DispatchFit& dispatch) {
  const std::size_t n = c.graph.ops.size();
  std::vector<double> device(n);
  std::vector<HostIssue> issue(n);
  for (std::size_t i = 0; i < n; ++i) {
    device[i] = c.graph_medians[i] > 0 ? c.graph_medians[i] + launch.queued * kernel_launches(c.graph.ops[i]) : 0.0;
    issue[i] = issue_of(c.graph.ops[i], dispatch);
  }
  const std::vector<double> waits = host_paced_waits(c.graph, device, issue, true, launch.wait);
  for (std::size_t i = 0; i < n; ++i) device[i] += waits[i];
  return device;
}

// A case's usable ops: Σ |log(predicted / measured)|, and the step error (Σ × count ratio − 1).
struct CaseError {
  double log_sum = 0;
  double step = 0;
  std::size_t ops = 0;
};

CaseError case_error(const EagerCase& c, EagerLaunch launch, const DispatchFit& dispatch) {
  const std::vector<double> predicted = predict_case(c, launch, dispatch);
  CaseError e;
  double predicted_step = 0, measured_step = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    if (!usable(c, i)) continue;
    e.log_sum += std::abs(std::log(predicted[i] / c.eager_medians[i]));
    predicted_step += predicted[i] * c.graph.ops[i].count;
    measured_step += c.eager_medians[i] * c.graph.ops[i].count;
    ++e.ops;
  }
  if (measured_step > 0) e.step = predicted_step / measured_step - 1;
  return e;
}

// Summed |log error| of every op, plus every step weighted by its op count.
double objective(const std::vector<EagerCase>& cases, EagerLaunch launch, const DispatchFit& dispatch) {
  double total = 0;
  for (const EagerCase& c : cases) {
    const CaseError e = case_error(c, launch, dispatch);
    total += e.log_sum + static_cast<double>(e.ops) * std::abs(std::log1p(e.step));
  }
  return total;
}

// Σ |log((graph median + queued) / held median)| over the ops timed held; 0 ops: no figure.
double held_objective(const std::vector<EagerCase>& cases, double queued, std::size_t& ops) {
  double total = 0;
  ops = 0;
  for (const EagerCase& c : cases)
    for (std::size_t i = 0; i < c.held_medians.size(); ++i) {
      if (!usable(c, i) || !(c.held_medians[i] > 0)) continue;
      total += std::abs(std::log((c.graph_medians[i] + queued * kernel_launches(c.graph.ops[i])) / c.held_medians[i]));
      ++ops;
    }
  return total;
}

// Candidate values for a coordinate: `steps` points from lo to hi, geometric (host costs
// range from a microsecond to tens of microseconds).
std::vector<double> candidates(double lo, double hi, int steps) {
  std::vector<double> v;
  for (int i = 0; i < steps; ++i) v.push_back(lo * std::pow(hi / lo, double(i) / (steps - 1)));
  return v;
}

// One kind's host times against the kernels its ops launched: a line when the counts vary
// and the fit gives both terms positive, else the median per kernel.
void fit_kind(OpKind k, const std::vector<double>& launches, const std::vector<double>& host, DispatchFit& fit) {
  std::vector<double> per;
  for (std::size_t i = 0; i < host.size(); ++i) per.push_back(host[i] / launches[i]);
  fit.by_kind[k] = median_or_zero(per);
  const auto [lo, hi] = std::minmax_element(launches.begin(), launches.end());
  if (host.size() < 3 || *lo == *hi) return;
  const LinearFit line = fit_line(launches, host);
  if (!(line.intercept > 0) || !(line.slope > 0)) return;
  fit.by_kind[k] = line.slope;
  fit.fixed_by_kind[k] = line.intercept;
}

}  // namespace

DispatchFit fit_dispatch(const std::vector<EagerCase>& cases, double launch_graph) {
  std::map<OpKind, std::pair<std::vector<double>, std::vector<double>>> host_by_kind;  // launches, host
  bool any = false;
  for (const EagerCase& c : cases) {
    const std::size_t n = c.graph.ops.size();
    if (c.graph_medians.size() != n || c.eager_medians.size() != n ||
        (!c.host_medians.empty() && c.host_medians.size() != n) ||
        (!c.held_medians.empty() && c.held_medians.size() != n))
      throw std::invalid_argument("fit_dispatch: per-op medians do not match the graph");
    for (std::size_t i = 0; i < n; ++i) {
      if (!usable(c, i)) continue;
      any = true;
      if (!c.host_medians.empty() && c.host_medians[i] > 0) {
        auto& [launches, host] = host_by_kind[calibration_family(c.graph.ops[i].kind)];
        launches.push_back(kernel_launches(c.graph.ops[i]));
        host.push_back(c.host_medians[i]);
      }
    }
  }
  if (!any) throw std::invalid_argument("fit_dispatch: no op measured both ways");

  DispatchFit fit;
  for (const auto& [k, samples] : host_by_kind) fit_kind(k, samples.first, samples.second, fit);
  // Both launch costs over one grid (0 included: either may be absent).
  std::vector<double> grid = candidates(0.05e-6, 20e-6, 96);
  grid.insert(grid.begin(), 0.0);
  EagerLaunch launch;
  std::size_t held_ops = 0;
  double best_held = held_objective(cases, 0.0, held_ops);
  if (held_ops > 0) {
    for (double q : grid)
      if (const double f = held_objective(cases, q, held_ops); f < best_held) best_held = f, launch.queued = q;
    double best = objective(cases, launch, fit);
    for (double w : grid)
      if (const double f = objective(cases, EagerLaunch{launch.queued, w}, fit); f < best) best = f, launch.wait = w;
  } else {
    double best = objective(cases, launch, fit);
    for (double q : grid)
      for (double w : grid)
        if (const double f = objective(cases, EagerLaunch{q, w}, fit); f < best) best = f, launch = EagerLaunch{q, w};
  }

  fit.launch_eager = launch_graph + launch.queued;
  fit.launch_wait = launch.wait;
  std::vector<double> values;
  for (const auto& [k, v] : fit.by_kind) values.push_back(v);
  fit.dispatch_eager = median_or_zero(values);
  std::vector<double> errs;
  for (const EagerCase& c : cases)
    if (const CaseError e = case_error(c, launch, fit); e.ops > 0) errs.push_back(std::abs(e.step));
  fit.step_error = median_or_zero(errs);
  return fit;
}

}  // namespace perfsim
