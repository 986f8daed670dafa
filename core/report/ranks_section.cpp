// ranks_section: a parallel step executed on several ranks, rank by rank, beside the prediction
// for each rank's pipeline stage.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/report/sections.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

// "3.20 ms (4.4%)": seconds of the step the collectives add, and their share of it.
std::string exposed_text(double seconds, double step) {
  return step > 0 ? fmt::format("{} ({:.1f}%)", format_duration(seconds), 100 * seconds / step)
                  : format_duration(seconds);
}

// "all_reduce 1.20 ms, send_recv 30 µs": the kinds the rank waited for, largest first.
std::string kinds_text(const std::map<Collective, double>& by_kind) {
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [c, seconds] : by_kind)
    if (seconds > 0) kinds.emplace_back(seconds, name_of(c));
  std::sort(kinds.rbegin(), kinds.rend());
  std::vector<std::string> parts;
  for (const auto& [seconds, name] : kinds) parts.push_back(name + " " + format_duration(seconds));
  return parts.empty() ? std::string("—") : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::optional<ReportSection> ranks_section(const RunResult& r) {
  bool any = false;
  for (const StepResult& s : r.steps) any = any || !s.rank_measured.empty();
  if (!any) return std::nullopt;
  ReportSection sec;
  sec.title = fmt::format("Ranks — measured on {}, predicted on {}", r.backend,
                          r.steps.front().predicted.hardware);
  TextTable& t = sec.table;
  t.add_column("step", Align::left);
  t.add_column("rank");
  t.add_column("host", Align::left);
  t.add_column("stage");
  t.add_column("pred time");
  t.add_column("meas time");
  t.add_column("meas wall");
  t.add_column("pred exposed comm");
  t.add_column("meas exposed comm");
  t.add_column("meas exposed by kind", Align::left);
  t.add_column("pred exec peak");
  t.add_column("meas exec peak");
  t.add_column("mem err");
  for (const StepResult& s : r.steps) {
    for (const RankMeasurement& rm : s.rank_measured) {
      const RankPrediction* pred = nullptr;
      if (s.layout)
        for (const RankPrediction& rp : s.layout->ranks)
          if (rp.stage == rm.stage) pred = &rp;
      const double peak = pred != nullptr ? pred->memory_executed_peak : 0;
      t.add_row({s.step, fmt::format("{}", rm.rank), rm.host, fmt::format("{}", rm.stage),
                 pred != nullptr ? format_duration(pred->prediction.step_time) : "—", format_duration(rm.step_time),
                 format_duration(rm.executed_wall),
                 s.layout ? exposed_text(s.layout->exposed_communication, s.predicted.step_time) : "—",
                 exposed_text(rm.exposed_communication, rm.step_time), kinds_text(rm.exposed_by_kind),
                 pred != nullptr ? format_bytes(peak) : "—",
                 format_bytes(rm.peak_bytes),
                 rm.peak_bytes > 0 && pred != nullptr ? format_signed_percent(relative_error(peak, rm.peak_bytes))
                                                      : "—"});
    }
  }
  sec.notes.push_back("pred time: the rank's own graph on its stage (no wait for the other ranks); meas time: the "
                      "stream timeline of its measured ops, collectives included");
  sec.notes.push_back("exposed comm: what the collectives add to the step, and its share (predicted: the layout's "
                      "slowest rank; measured: the rank's timeline of measured op times less the same with the "
                      "collectives free); by kind: the same with only that kind free (a pipeline's send_recv "
                      "holds its bubble: a receive waits for the other stage)");
  sec.notes.push_back("the step's measured time above is the slowest rank's");
  return sec;
}

}  // namespace perfsim
