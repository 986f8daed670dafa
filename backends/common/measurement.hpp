// Turning timed repeats into a Measurement, the same way for every backend: per-op medians
// and minima, time by class (Σ median × count), the step time (the cost model's stream
// timeline fed with the medians: Σ median × count on one stream, overlap honoured on several),
// and the median whole-run wall time.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/graph/graph.hpp"
#include "core/run/results.hpp"
#include "core/statistics.hpp"

namespace perfsim {


// samples[i]: the timed seconds of op i over the repeats; walls: one whole run per repeat.
// copy_engines: whether the device copies host data beside its kernels (timeline_makespan).
[[nodiscard]] inline Measurement summarize_runs(const Graph& g,
                                                const std::vector<std::vector<double>>& samples,
                                                const std::vector<double>& walls,
                                                std::string backend, std::string device,
                                                int warmup, int repeats,
                                                bool copy_engines = true) {
  Measurement m;
  m.backend = std::move(backend);
  m.device = std::move(device);
  m.warmup = warmup;
  m.repeats = repeats;
  std::vector<double> medians;
  medians.reserve(g.ops.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    OpMeasurement om;
    om.op = op.id;
    om.median = median_or_zero(samples[i]);
    om.min = samples[i].empty() ? 0 : *std::min_element(samples[i].begin(), samples[i].end());
    om.executed = true;
    m.ops.push_back(om);
    m.time_by_class[class_of(op.kind)] += om.median * op.count;
    medians.push_back(om.median);
  }
  m.step_time = timeline_makespan(g, medians, copy_engines);
  m.executed_wall = median_or_zero(walls);
  return m;
}

// Each op's start and end in the timed run of median length (totals[r]: run r's length;
// starts[r][i], ends[r][i]: op i's offsets in it), so that a trace shows one real run.
inline void keep_median_run(Measurement& m, const std::vector<double>& totals,
                            const std::vector<std::vector<double>>& starts, const std::vector<std::vector<double>>& ends) {
  if (totals.empty() || starts.size() != totals.size() || ends.size() != totals.size()) return;
  std::vector<std::size_t> order(totals.size());
  for (std::size_t r = 0; r < order.size(); ++r) order[r] = r;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return totals[a] < totals[b]; });
  const std::size_t run = order[order.size() / 2];
  for (std::size_t i = 0; i < m.ops.size() && i < starts[run].size() && i < ends[run].size(); ++i) {
    m.ops[i].start = starts[run][i];
    m.ops[i].end = ends[run][i];
  }
}

}  // namespace perfsim
