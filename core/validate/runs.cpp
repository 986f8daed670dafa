// compare_runs (see runs.hpp): the ops of several validation runs matched by
// scenario, step and name.
#include "core/validate/runs.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>
#include <tuple>

namespace perfsim {

double OpAcrossRuns::mean() const {
  if (errors.empty()) return 0;
  return std::accumulate(errors.begin(), errors.end(), 0.0) / static_cast<double>(errors.size());
}

RunsComparison compare_runs(const std::vector<ValidationSummary>& runs, double op_error) {
  if (runs.size() < 2) throw std::invalid_argument("compare_runs: needs two runs or more");
  if (!(op_error > 0)) throw std::invalid_argument("compare_runs: op_error must be > 0");
  using Key = std::tuple<std::string, std::string, std::string>;
  struct Seen {
    OpKind kind = OpKind::gemm;
    std::vector<double> errors, measured;
  };
  // Ops in the order of the first run; a later run's op joins only where every run before had it.
  std::vector<Key> order;
  std::map<Key, Seen> ops;
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (const OpError& e : runs[r].ops) {
      const Key key{e.scenario, e.step, e.op};
      if (r == 0) {
        if (!ops.emplace(key, Seen{e.kind, {}, {}}).second) continue;  // a name twice: keep the first
        order.push_back(key);
      }
      const auto it = ops.find(key);
      if (it == ops.end() || it->second.errors.size() != r) continue;
      it->second.errors.push_back(e.error);
      it->second.measured.push_back(e.measured);
    }

  RunsComparison c;
  c.op_error = op_error;
  c.over.assign(runs.size(), 0);
  std::vector<double> spread;
  for (const Key& key : order) {
    const Seen& s = ops.at(key);
    if (s.errors.size() != runs.size()) continue;
    ++c.compared;
    std::size_t over = 0;
    for (std::size_t r = 0; r < runs.size(); ++r)
      if (std::fabs(s.errors[r]) > op_error) ++over, ++c.over[r];
    if (over == runs.size())
      c.every_run.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), s.kind, s.errors});
    else if (over > 0)
      ++c.some_runs;
    const auto [lo, hi] = std::minmax_element(s.measured.begin(), s.measured.end());
    const double mid = median_or_zero(s.measured);
    if (mid > 0) spread.push_back((*hi - *lo) / mid);
  }
  std::stable_sort(c.every_run.begin(), c.every_run.end(), [](const OpAcrossRuns& a, const OpAcrossRuns& b) {
    return std::fabs(a.mean()) > std::fabs(b.mean());
  });
  c.measured_spread = abs_error_stats(spread);
  return c;
}

}  // namespace perfsim
