// The report of several validation runs compared (core/validate/runs.hpp): each run's
// overall figures, then the ops over the threshold in every run, as a table or markdown (the
// JSON form is in validation_data.cpp).
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/report/validation.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

std::string stat(const ErrorStats& s, double ErrorStats::*field) {
  return s.count > 0 ? format_percent(s.*field) : std::string("—");
}

ReportSection each_run_section(const std::vector<ValidationSummary>& runs, const RunsComparison& c,
                               const RunsContext& ctx) {
  ReportSection sec;
  sec.title = "Each run |error|";
  TextTable& t = sec.table;
  t.add_column("run");
  t.add_column("measurements", Align::left);
  t.add_column("device", Align::left);
  t.add_column("ops");
  t.add_column("op median");
  t.add_column("op p90");
  t.add_column(fmt::format("ops over {}", format_percent(c.op_error)));
  t.add_column("step median");
  t.add_column("step max");
  t.add_column("speedup max");
  t.add_column("memory max");
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const ValidationSummary& s = runs[r];
    t.add_row({std::to_string(r + 1), ctx.files[r], ctx.devices[r], std::to_string(s.all_ops.count),
               stat(s.all_ops, &ErrorStats::median), stat(s.all_ops, &ErrorStats::p90),
               fmt::format("{} of {}", c.over[r], c.compared), stat(s.step_time, &ErrorStats::median),
               stat(s.step_time, &ErrorStats::max), stat(s.speedup, &ErrorStats::max),
               stat(s.memory, &ErrorStats::max)});
  }
  sec.notes.push_back(fmt::format("ops over {}: of the {} ops measured in every run (same scenario, step and "
                                  "op name)",
                                  format_percent(c.op_error), c.compared));
  for (std::size_t r = 0; r < runs.size(); ++r)
    if (runs[r].ops.empty())
      sec.notes.push_back(fmt::format("run {}: {} holds no measured op of this suite (a report of another suite?)",
                                      r + 1, ctx.files[r]));
  return sec;
}

ReportSection every_run_section(const RunsComparison& c, std::size_t runs) {
  ReportSection sec;
  sec.title = fmt::format("Ops over {} in every run: {} of {}", format_percent(c.op_error), c.every_run.size(),
                          c.compared);
  TextTable& t = sec.table;
  if (!c.every_run.empty()) {
    t.add_column("op", Align::left);
    t.add_column("kind", Align::left);
    for (std::size_t r = 0; r < runs; ++r) t.add_column(fmt::format("run {}", r + 1));
    t.add_column("mean");
    for (const OpAcrossRuns& o : c.every_run) {
      std::vector<std::string> row{fmt::format("{}/{}/{}", o.scenario, o.step, o.op), std::string(name_of(o.kind))};
      for (double e : o.errors) row.push_back(format_signed_percent(e));
      row.push_back(format_signed_percent(o.mean()));
      t.add_row(std::move(row));
    }
  }
  sec.notes.push_back(fmt::format("{} more op{} over {} in some runs but not all", c.some_runs,
                                  c.some_runs == 1 ? "" : "s", format_percent(c.op_error)));
  if (c.measured_spread.count > 0)
    sec.notes.push_back(fmt::format("measured spread, (max − min) / median of each op's measured time over the "
                                    "runs: median {}, p90 {}",
                                    format_percent(c.measured_spread.median), format_percent(c.measured_spread.p90)));
  sec.notes.push_back("an op over the threshold in every run errs by a bias of the model (or of how the op is "
                      "measured); one over it in some runs only moves with the run");
  return sec;
}

ReportDocument runs_document(const std::vector<ValidationSummary>& runs, const RunsComparison& c,
                             const RunsContext& ctx) {
  const ValidationContext& b = ctx.base;
  ReportDocument d;
  d.header.emplace_back("validate", fmt::format("{} ({} scenario file{}{})", b.suite, b.scenarios.size(),
                                                b.scenarios.size() == 1 ? "" : "s", b.quick ? ", quick sizes" : ""));
  d.header.emplace_back("measured", fmt::format("{} saved reports, priced again (nothing executed)", runs.size()));
  d.header.emplace_back("profile", fmt::format("{} ({})", b.profile, profile_status(b)));
  if (!b.profile_source.empty()) d.header.emplace_back("profile from", b.profile_source);
  d.header.emplace_back("op error", fmt::format("{} (--op-error)", format_percent(c.op_error)));
  // Runs timed differently differ by the method too (CUDA.md, Timing).
  std::vector<std::string> timed;
  for (std::size_t r = 0; r < runs.size(); ++r)
    timed.push_back(fmt::format("run {}: {}", r + 1, fmt::join(op_timings(runs[r]), ", ")));
  for (std::size_t r = 1; r < runs.size(); ++r)
    if (op_timings(runs[r]) != op_timings(runs[0])) {
      d.header.emplace_back("warning", fmt::format("the runs timed their ops differently ({})", fmt::join(timed, "; ")));
      break;
    }
  for (std::size_t r = 0; r < runs.size(); ++r)
    if (std::string w = op_timing_mismatch(b, runs[r]); !w.empty()) {
      d.header.emplace_back("warning", fmt::format("run {}: {}", r + 1, w));
      break;
    }
  d.sections.push_back(each_run_section(runs, c, ctx));
  d.sections.push_back(every_run_section(c, runs.size()));
  return d;
}

}  // namespace

std::string format_runs_comparison(const std::vector<ValidationSummary>& runs, const RunsComparison& c,
                                   const RunsContext& ctx, ReportFormat f) {
  if (f == ReportFormat::json) return format_runs_comparison_json(runs, c, ctx);
  if (f == ReportFormat::csv)
    throw std::invalid_argument("format_runs_comparison: no CSV form (table, markdown or JSON)");
  const ReportDocument d = runs_document(runs, c, ctx);
  return f == ReportFormat::markdown ? format_validation_document_markdown(d) : format_validation_document_text(d);
}

}  // namespace perfsim
