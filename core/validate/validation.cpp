// Validation statistics over RunResults: per-op errors grouped by class, step time and memory
// errors, and the speedup of each optimization over the step before it.
#include "core/validate/validation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/builders/streams.hpp"
#include "core/run/results.hpp"

namespace perfsim {

namespace {

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string join_where(const std::string& scenario, const std::string& step) {
  return scenario + "/" + step;
}

template <class T, class Error>
std::optional<T> worst_of(const std::vector<T>& items, Error error) {
  std::optional<T> best;
  double worst = -1;
  for (const T& item : items) {
    const std::optional<double> e = error(item);
    if (!e) continue;
    if (std::fabs(*e) > worst) {
      worst = std::fabs(*e);
      best = item;
    }
  }
  return best;
}

// The host's issue of an eager step, predicted and measured, when both sides have it.
void host_issue(const StepResult& s, std::size_t n, StepValidation& v) {
  double predicted = 0, measured = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!s.measured->ops[i].executed) continue;
    const double count = s.graph.ops[i].count;
    predicted += s.predicted.ops[i].dispatch_time * count;
    measured += s.measured->ops[i].host * count;
  }
  if (s.graph.graphed || !(predicted > 0) || !(measured > 0)) return;
  v.predicted_issue = predicted;
  v.measured_issue = measured;
  v.issue_error = relative_error(predicted, measured);
}

}  // namespace

ErrorStats abs_error_stats(const std::vector<double>& errors) {
  ErrorStats s;
  s.count = errors.size();
  if (errors.empty()) return s;
  std::vector<double> a;
  a.reserve(errors.size());
  for (double e : errors) a.push_back(std::fabs(e));
  s.median = median_of(a);
  s.p90 = percentile_nearest_rank(a, 0.9);
  s.max = *std::max_element(a.begin(), a.end());
  return s;
}

const std::vector<DurationBand>& duration_bands() {
  static const std::vector<DurationBand> bands = {{0, 10e-6, "under 10 µs"},
                                                  {10e-6, 100e-6, "10–100 µs"},
                                                  {100e-6, std::numeric_limits<double>::infinity(), "100 µs and more"}};
  return bands;
}

std::string run_label(const RunResult& r) {
  if (r.sweep_point.empty()) return r.scenario;
  return r.scenario + "[" + sweep_label(r.sweep_point) + "]";
}

ValidationSummary summarize_validation(const std::vector<RunResult>& runs) {
  ValidationSummary out;
  for (const RunResult& r : runs) {
    const std::string label = run_label(r);
    const StepResult* previous = nullptr;
    for (const StepResult& s : r.steps) {
      StepValidation v;
      v.scenario = label;
      v.step = s.step;
      v.predicted_time = s.predicted.step_time;
      v.predicted_peak = s.predicted.memory_executed.peak;
      if (s.measured) {
        const Measurement& m = *s.measured;
        v.measured_time = m.step_time;
        v.time_error = finite(relative_error(v.predicted_time, m.step_time));
        v.measured_peak = m.peak_bytes;
        v.timed_runs = m.repeats;
        v.op_timing = m.op_timing;
        v.memory_error = finite(relative_error(v.predicted_peak, m.peak_bytes));
        const std::size_t n = std::min({s.graph.ops.size(), m.ops.size(), s.predicted.ops.size()});
        host_issue(s, n, v);
        for (std::size_t i = 0; i < n; ++i) {
          const OpMeasurement& om = m.ops[i];
          // The cost model prices an op's device time; the host's pace is the step's business
          // (host_paced_waits), so an eager op is compared where it ran queued.
          const double measured = om.device > 0 ? om.device : om.median;
          // An op the backend did not time (or timed at zero) has no error to speak of. A
          // pipeline transfer's time on ranks is mostly its wait for the other stage, the
          // bubble, which the step time compares.
          if (!om.executed || !(measured > 0)) continue;
          if (!s.rank_measured.empty() && is_pipeline_stream(s.graph.ops[i].stream)) continue;
          OpError e;
          e.scenario = label;
          e.step = s.step;
          e.op = s.graph.ops[i].name;
          e.kind = s.graph.ops[i].kind;
          e.op_class = class_of(e.kind);
          // Against a device time, the device part of the prediction: less the wait for the
          // host's issue that a host-paced step puts inside OpCost::time.
          const OpCost& c = s.predicted.ops[i];
          e.predicted = om.device > 0 ? c.time - c.host_wait : c.time;
          e.measured = measured;
          e.measured_in_step = om.median;
          if (om.device > 0) ++out.held_ops;
          e.error = relative_error(e.predicted, e.measured);
          if (c.dispatch_time > 0 && om.host > 0) {
            e.predicted_dispatch = c.dispatch_time;
            e.measured_host = om.host;
          }
          out.ops.push_back(std::move(e));
        }
      } else {
        ++out.unmeasured_steps;
        v.note = s.not_executed.empty() ? std::string("not measured") : s.not_executed;
      }
      out.steps.push_back(std::move(v));

      if (previous != nullptr && previous->measured && s.measured) {
        const double base_tokens = previous->graph.workload.tokens_per_step();
        const double tokens = s.graph.workload.tokens_per_step();
        SpeedupValidation sp;
        sp.scenario = label;
        sp.step = s.step;
        sp.previous = previous->step;
        sp.predicted = speedup(previous->predicted.step_time, base_tokens,
                               s.predicted.step_time, tokens);
        sp.measured = speedup(previous->measured->step_time, base_tokens,
                              s.measured->step_time, tokens);
        sp.error = relative_error(sp.predicted, sp.measured);
        if (std::isfinite(sp.error)) out.speedups.push_back(std::move(sp));
      }
      previous = &s;
    }
  }

  std::vector<double> all;
  all.reserve(out.ops.size());
  for (const OpError& e : out.ops) all.push_back(e.error);
  out.all_ops = abs_error_stats(all);
  std::vector<double> times, memory, speedups;
  for (const StepValidation& v : out.steps) {
    if (v.time_error) times.push_back(*v.time_error);
    if (v.memory_error) memory.push_back(*v.memory_error);
  }
  for (const SpeedupValidation& sp : out.speedups) speedups.push_back(sp.error);
  out.step_time = abs_error_stats(times);
  out.memory = abs_error_stats(memory);
  out.speedup = abs_error_stats(speedups);
  for (OpClass c : all_op_classes)
    if (auto g = error_group(out.ops, c, [](const OpError& e) { return e.op_class; }))
      out.classes.push_back(ClassValidation{c, g->first, g->second});
  const std::vector<DurationBand>& bands = duration_bands();
  const auto band_of = [&bands](const OpError& e) {
    std::size_t i = 0;
    while (i + 1 < bands.size() && e.measured >= bands[i].high) ++i;
    return i;
  };
  for (std::size_t b = 0; b < bands.size(); ++b)
    if (auto g = error_group(out.ops, b, band_of)) out.durations.push_back({bands[b], g->first, g->second});
  return out;
}

std::vector<CheckedFigure> checked_figures(const ValidationSummary& s) {
  std::vector<CheckedFigure> out;
  for (const StepValidation& v : s.steps) {
    if (v.time_error) out.push_back({join_where(v.scenario, v.step), "step time", *v.time_error});
    if (v.memory_error)
      out.push_back({join_where(v.scenario, v.step), "peak memory", *v.memory_error});
  }
  for (const ClassValidation& c : s.classes)
    out.push_back({"op class " + std::string(name_of(c.op_class)), "per-op median", c.stats.median});
  for (const SpeedupValidation& sp : s.speedups)
    out.push_back({join_where(sp.scenario, sp.step), "speedup", sp.error});
  for (const CollectiveValidation& c : s.collectives)
    out.push_back({std::string(name_of(c.collective)), "collective median", c.stats.median});
  return out;
}

std::vector<CheckedFigure> figures_over(const ValidationSummary& s, double max_error) {
  std::vector<CheckedFigure> over;
  for (CheckedFigure& f : checked_figures(s))
    if (std::fabs(f.error) > max_error) over.push_back(std::move(f));
  std::stable_sort(over.begin(), over.end(), [](const CheckedFigure& a, const CheckedFigure& b) {
    return std::fabs(a.error) > std::fabs(b.error);
  });
  return over;
}

std::optional<StepValidation> worst_step_time(const ValidationSummary& s) {
  return worst_of(s.steps, [](const StepValidation& v) { return v.time_error; });
}

std::optional<StepValidation> worst_memory(const ValidationSummary& s) {
  return worst_of(s.steps, [](const StepValidation& v) { return v.memory_error; });
}

std::optional<OpError> worst_op(const ValidationSummary& s) {
  return worst_of(s.ops, [](const OpError& e) { return std::optional<double>(e.error); });
}

std::optional<CollectiveError> worst_collective(const ValidationSummary& s) {
  return worst_of(s.collective_errors, [](const CollectiveError& e) { return std::optional<double>(e.error); });
}

std::optional<SpeedupValidation> worst_speedup(const ValidationSummary& s) {
  return worst_of(s.speedups,
                  [](const SpeedupValidation& v) { return std::optional<double>(v.error); });
}

std::vector<std::string> op_timings(const ValidationSummary& s) {
  std::vector<std::string> out;
  for (const StepValidation& v : s.steps)
    if (!v.op_timing.empty() && std::find(out.begin(), out.end(), v.op_timing) == out.end()) out.push_back(v.op_timing);
  return out;
}

}  // namespace perfsim
