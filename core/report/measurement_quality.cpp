// How far a measured step can be trusted: the spread of its timed repeats, and the warnings a
// run prints when it is large. The backends keep each op's median and fastest repeat
// (OpMeasurement); the step at every op's fastest repeat against the step at the medians shows
// how much the repeats varied, the same figure for every backend.
#include <cmath>

#include <fmt/format.h>

#include "core/report/report.hpp"

namespace perfsim {

std::optional<double> repeat_spread(const StepResult& s) {
  if (!s.measured || s.measured->repeats < 2) return std::nullopt;
  const Measurement& m = *s.measured;
  double median = 0, fastest = 0;
  for (const OpMeasurement& om : m.ops) {
    if (!om.executed || om.op < 0 || static_cast<std::size_t>(om.op) >= s.graph.ops.size()) continue;
    const double count = static_cast<double>(s.graph.ops[static_cast<std::size_t>(om.op)].count);
    median += om.median * count;
    fastest += om.min * count;
  }
  if (!(median > 0) || !(fastest >= 0)) return std::nullopt;
  return (median - fastest) / median;
}

std::vector<std::string> measurement_warnings(const std::vector<RunResult>& points) {
  std::vector<std::string> out;
  const StepResult* worst = nullptr;
  double worst_spread = 0;
  int repeats = 0;
  for (const RunResult& r : points)
    for (const StepResult& s : r.steps)
      if (const std::optional<double> spread = repeat_spread(s); spread && *spread > worst_spread) {
        worst_spread = *spread;
        worst = &s;
        repeats = s.measured->repeats;
      }
  if (worst != nullptr && worst_spread > large_repeat_spread)
    out.push_back(fmt::format("the timed repeats varied by up to {:.0f}% (step {}, {} repeats): its measured time, "
                              "and the error against it, are uncertain by as much; more repeats (--set "
                              "repeats=10, where the scenario declares them) or a quieter machine narrow it",
                              worst_spread * 100, worst->step, repeats));
  return out;
}

}  // namespace perfsim
