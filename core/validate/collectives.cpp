// Collectives in `perfsim validate`: timed on the backend's GPUs at sizes off the calibration
// grid, priced by collective_time(), summarized per collective.
#include "core/validate/collectives.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "core/cost/roofline.hpp"
#include "core/builders/streams.hpp"
#include "core/run/backend.hpp"
#include "core/run/results.hpp"
#include "core/validate/validation.hpp"

namespace perfsim {

std::vector<double> collective_validation_payloads() {
  std::vector<double> out;
  for (double b = 8 << 10; b <= 256 << 20; b *= 8) out.push_back(3 * b);
  return out;
}

CollectiveMeasurements measure_collectives(Backend& backend,
                                           const std::function<void(const std::string&)>& progress) {
  CollectiveMeasurements out;
  const int gpus = backend.gpu_count();
  if (gpus < 2) {
    out.skipped = fmt::format("the {} backend spans {} device; collectives need 2 or more GPUs", backend.name(),
                              gpus);
    return out;
  }
  const std::vector<double> payloads = collective_validation_payloads();
  for (int group = 2; group <= gpus; group *= 2)
    for (Collective c : all_collectives) {
      if (progress) progress(fmt::format("collectives: {} over {} GPUs", name_of(c), group));
      try {
        const std::vector<double> t = backend.time_collective(c, group, payloads);
        for (std::size_t i = 0; i < t.size() && i < payloads.size(); ++i)
          out.points.push_back({c, group, payloads[i], t[i]});
      } catch (const std::exception& e) {
        // The suite's results stand without it; the first failure is the one reported.
        if (out.skipped.empty()) out.skipped = fmt::format("{} over {} GPUs: {}", name_of(c), group, e.what());
      }
    }
  return out;
}

namespace {

// Statistics over s.collective_errors, all and per collective.
void summarize_collectives(ValidationSummary& s) {
  std::vector<double> all;
  for (const CollectiveError& e : s.collective_errors) all.push_back(e.error);
  s.all_collectives = abs_error_stats(all);
  for (Collective c : all_collectives)
    if (auto g = error_group(s.collective_errors, c, [](const CollectiveError& e) { return e.collective; }))
      s.collectives.push_back({c, g->first, g->second});
}

// The bytes an in-step collective moves as collective_time() prices them: its payload, else its
// largest operand.
double payload_of(const Op& op, const Graph& g) {
  if (op.attrs.payload_bytes > 0) return op.attrs.payload_bytes;
  double largest = 0;
  for (const auto* ids : {&op.inputs, &op.outputs})
    for (int id : *ids) largest = std::max(largest, g.tensor(id).bytes());
  return largest;
}

}  // namespace

void add_collective_errors(ValidationSummary& s, const CollectiveMeasurements& m, const Hardware& hw) {
  s.collectives_skipped = m.skipped;
  for (const CollectiveMeasurement& p : m.points) {
    const std::optional<double> predicted = collective_time(p.collective, p.group, p.payload, hw);
    if (!predicted || !(p.seconds > 0)) continue;
    s.collective_errors.push_back(
        {p.collective, p.group, p.payload, *predicted, p.seconds, relative_error(*predicted, p.seconds), {}});
  }
  summarize_collectives(s);
}

void add_step_collective_errors(ValidationSummary& s, const std::vector<RunResult>& runs) {
  s.collectives_in_steps = true;
  for (const RunResult& r : runs)
    for (const StepResult& step : r.steps) {
      if (!step.measured) continue;
      const Graph& g = step.graph;
      const std::size_t n = std::min({g.ops.size(), step.measured->ops.size(), step.predicted.ops.size()});
      for (std::size_t i = 0; i < n; ++i) {
        const Op& op = g.ops[i];
        if (op.kind != OpKind::collective || op.attrs.group <= 1 || is_pipeline_stream(op.stream)) continue;
        const OpMeasurement& om = step.measured->ops[i];
        const double measured = om.device > 0 ? om.device : om.median;
        if (!om.executed || !(measured > 0)) continue;
        const double predicted = step.predicted.ops[i].time;
        s.collective_errors.push_back({op.attrs.collective, op.attrs.group, payload_of(op, g), predicted, measured,
                                       relative_error(predicted, measured),
                                       fmt::format("{}/{} {}", run_label(r), step.step, op.name)});
      }
    }
  if (s.collective_errors.empty() && s.collectives_skipped.empty())
    s.collectives_skipped = "no step executed a collective";
  summarize_collectives(s);
}

}  // namespace perfsim
