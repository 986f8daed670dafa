// The `perfsim validate` report as a document (header, overall errors, per-op errors by class,
// step time and memory, host issue of eager steps, speedups, figures over --max-error) and its
// text and markdown renderings. JSON and CSV live in validation_data.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/report/validation.hpp"

namespace perfsim {

namespace {

constexpr const char* dash = "—";

std::string opt_duration(const std::optional<double>& v) { return v ? format_duration(*v) : dash; }
std::string opt_bytes(const std::optional<double>& v) { return v ? format_bytes(*v) : dash; }
std::string opt_percent(const std::optional<double>& v) { return v ? format_signed_percent(*v) : dash; }

std::string where(const std::string& scenario, const std::string& step) {
  return scenario + "/" + step;
}

std::string op_where(const OpError& e) {
  return fmt::format("{}/{}/{} {}", e.scenario, e.step, e.op, format_signed_percent(e.error));
}

std::string collective_where(const CollectiveError& e) {
  return fmt::format("{}{} over {} GPUs, {} {}", e.op.empty() ? "" : e.op + ": ", name_of(e.collective), e.group,
                     format_bytes(e.payload), format_signed_percent(e.error));
}

// One row of the overall table from a family's statistics and the worst figure's label.
std::vector<std::string> stats_row(const std::string& figure, const ErrorStats& s, const std::string& worst) {
  if (s.count == 0) return {figure, "0", dash, dash, dash, "not measured"};
  return {figure, std::to_string(s.count), format_percent(s.median), format_percent(s.p90),
          format_percent(s.max), worst};
}

ReportSection overall_section(const ValidationSummary& s, const ValidationContext& c) {
  ReportSection sec;
  sec.title = "Overall |error|";
  TextTable& t = sec.table;
  t.add_column("figure", Align::left);
  t.add_column("count");
  t.add_column("median");
  t.add_column("p90");
  t.add_column("max");
  t.add_column("worst", Align::left);

  const auto wo = worst_op(s);
  t.add_row(stats_row("per-op time", s.all_ops, wo ? op_where(*wo) : ""));

  const auto wt = worst_step_time(s);
  t.add_row(stats_row("step time (end to end)", s.step_time,
                      wt ? where(wt->scenario, wt->step) + " " + opt_percent(wt->time_error) : ""));
  const auto ws = worst_speedup(s);
  t.add_row(stats_row("speedup per optimization", s.speedup,
                      ws ? where(ws->scenario, ws->step) + " " + format_signed_percent(ws->error)
                         : ""));
  const auto wm = worst_memory(s);
  t.add_row(stats_row("peak memory", s.memory,
                      wm ? where(wm->scenario, wm->step) + " " + opt_percent(wm->memory_error)
                         : ""));
  if (!s.collective_errors.empty()) {
    const auto wc = worst_collective(s);
    t.add_row(stats_row("collective time", s.all_collectives, wc ? collective_where(*wc) : ""));
  }

  sec.notes.push_back("error: (predicted − measured) / measured; median, p90 (nearest rank) and "
                      "max of its magnitude");
  if (s.unmeasured_steps > 0)
    sec.notes.push_back(fmt::format("{} step(s) not measured (see the step table); they count in "
                                    "no figure",
                                    s.unmeasured_steps));
  if (!s.collectives_skipped.empty())
    sec.notes.push_back(fmt::format("collectives {}: {}", s.collective_errors.empty() ? "not validated" : "partly validated",
                                    s.collectives_skipped));
  if (!c.calibrated)
    sec.notes.push_back("the profile is UNCALIBRATED (datasheet figures): these errors measure the "
                        "datasheet model; `perfsim calibrate` fits a profile of this device");
  return sec;
}

// A section of per-op statistics, one row per group: its name, ops, median, p90, max, worst op.
ReportSection op_stats_section(std::string title, const char* group_column) {
  ReportSection sec;
  sec.title = std::move(title);
  TextTable& t = sec.table;
  t.add_column(group_column, Align::left);
  t.add_column("ops");
  t.add_column("median");
  t.add_column("p90");
  t.add_column("max");
  t.add_column("worst op", Align::left);
  return sec;
}

ReportSection class_section(const ValidationSummary& s) {
  ReportSection sec = op_stats_section("Per-op time error by op class", "class");
  for (const ClassValidation& cv : s.classes)
    sec.table.add_row(stats_row(std::string(name_of(cv.op_class)), cv.stats, op_where(cv.worst)));
  sec.notes.push_back("per op: predicted time vs measured median of one op (not × layer count), "
                      "every executed op of every step");
  if (s.held_ops > 0)
    sec.notes.push_back(fmt::format("{} of the {} ops ran eagerly and are compared by their device time "
                                    "(timed with the stream held until the step was issued) against "
                                    "the prediction less its wait for the host",
                                    s.held_ops, s.ops.size()));
  return sec;
}

ReportSection duration_section(const ValidationSummary& s) {
  ReportSection sec = op_stats_section("Per-op time error by measured op time", "op time");
  for (const DurationValidation& d : s.durations) sec.table.add_row(stats_row(d.band.label, d.stats, op_where(d.worst)));
  sec.notes.push_back("the ops of the class table, by their measured time: ops of a few µs are bound by launch "
                      "and latency, which a roofline of bytes and FLOPs prices least well");
  return sec;
}

ReportSection step_section(const ValidationSummary& s) {
  ReportSection sec;
  sec.title = "Step time (full model) and peak memory (graph as built)";
  TextTable& t = sec.table;
  bool any_note = false;
  for (const StepValidation& v : s.steps) any_note = any_note || !v.note.empty();
  t.add_column("scenario", Align::left);
  t.add_column("step", Align::left);
  t.add_column("pred time");
  t.add_column("meas time");
  t.add_column("time err");
  t.add_column("pred peak");
  t.add_column("meas peak");
  t.add_column("mem err");
  if (any_note) t.add_column("note", Align::left);
  for (const StepValidation& v : s.steps) {
    std::vector<std::string> row{v.scenario,
                                 v.step,
                                 format_duration(v.predicted_time),
                                 opt_duration(v.measured_time),
                                 opt_percent(v.time_error),
                                 format_bytes(v.predicted_peak),
                                 opt_bytes(v.measured_peak),
                                 opt_percent(v.memory_error)};
    if (any_note) row.push_back(v.note.empty() ? "" : "not executed: " + v.note);
    t.add_row(std::move(row));
  }
  return sec;
}

// Eager steps whose host issue both sides have: how fast this machine's host issued the ops
// against the profile's host, beside the step's time error.
std::optional<ReportSection> host_issue_section(const ValidationSummary& s) {
  ReportSection sec;
  sec.title = "Host issue of eager steps (seconds the host spent issuing ops, full model)";
  TextTable& t = sec.table;
  t.add_column("scenario", Align::left);
  t.add_column("step", Align::left);
  t.add_column("pred issue");
  t.add_column("meas issue");
  t.add_column("issue err");
  t.add_column("time err");
  for (const StepValidation& v : s.steps)
    if (v.issue_error)
      t.add_row({v.scenario, v.step, opt_duration(v.predicted_issue), opt_duration(v.measured_issue),
                 opt_percent(v.issue_error), opt_percent(v.time_error)});
  if (t.empty()) return std::nullopt;
  sec.notes.push_back("predicted: the profile's host dispatch; measured: the backend's host timer. An eager "
                      "step bound by its host errs with the issue: then this machine's host ran at another "
                      "speed than the calibration's");
  return sec;
}

ReportSection speedup_section(const ValidationSummary& s) {
  ReportSection sec;
  sec.title = "Speedup of each optimization over the step before it";
  TextTable& t = sec.table;
  t.add_column("scenario", Align::left);
  t.add_column("step", Align::left);
  t.add_column("over", Align::left);
  t.add_column("pred speedup");
  t.add_column("meas speedup");
  t.add_column("error");
  for (const SpeedupValidation& sp : s.speedups)
    t.add_row({sp.scenario, sp.step, sp.previous, format_speedup(sp.predicted),
               format_speedup(sp.measured), format_signed_percent(sp.error)});
  sec.notes.push_back("speedup: throughput (tokens/s) ratio; error: (predicted − measured) / "
                      "measured speedup");
  return sec;
}

// Every collective, group size and buffer size timed; absent when none was.
std::optional<ReportSection> collective_section(const ValidationSummary& s) {
  if (s.collective_errors.empty()) return std::nullopt;
  ReportSection sec;
  const bool in_steps = s.collectives_in_steps;
  sec.title = in_steps ? "Collective time (the steps' own, on ranks)"
                       : "Collective time (NCCL, between the calibration's buffer sizes)";
  TextTable& t = sec.table;
  if (in_steps) t.add_column("op", Align::left);
  t.add_column("collective", Align::left);
  t.add_column("GPUs");
  t.add_column("size");
  t.add_column("pred time");
  t.add_column("meas time");
  t.add_column("time err");
  for (const CollectiveError& e : s.collective_errors) {
    std::vector<std::string> row{std::string(name_of(e.collective)), std::to_string(e.group), format_bytes(e.payload),
                                 format_duration(e.predicted), format_duration(e.measured),
                                 format_signed_percent(e.error)};
    if (in_steps) row.insert(row.begin(), e.op);
    t.add_row(std::move(row));
  }
  std::vector<std::string> medians;
  for (const CollectiveValidation& c : s.collectives)
    medians.push_back(fmt::format("{} {}", name_of(c.collective), format_percent(c.stats.median)));
  sec.notes.push_back(in_steps ? "size: the buffer as nccl-tests counts it; measured: the op's median in its step on rank "
                                 "0 (a wait for a slower rank included); predicted: the op's time in the step's "
                                 "prediction; pipeline transfers are in the step time (their wait is the bubble)"
                               : "size: the buffer as nccl-tests counts it; measured: median of back-to-back calls, "
                                 "slowest rank (as calibrate times them); predicted: the profile's collective time");
  sec.notes.push_back(fmt::format("median |error|: {}", fmt::join(medians, ", ")));
  return sec;
}

ReportSection over_section(const ValidationSummary& s, double max_error) {
  ReportSection sec;
  const std::vector<CheckedFigure> over = figures_over(s, max_error);
  sec.title = fmt::format("Figures over --max-error {}: {} of {}", format_percent(max_error),
                          over.size(), checked_figures(s).size());
  TextTable& t = sec.table;
  t.add_column("figure", Align::left);
  t.add_column("where", Align::left);
  t.add_column("error");
  for (const CheckedFigure& f : over)
    t.add_row({f.what, f.where,
               f.is_median() ? format_percent(f.error) : format_signed_percent(f.error)});
  sec.notes.push_back("checked: each measured step's time and peak memory error, each op class's "
                      "median per-op |error|, each optimization's speedup error, each collective's "
                      "median |error|");
  return sec;
}

std::string render_text(const ReportSection& s) {
  std::string out = s.title + "\n";
  if (!s.table.empty()) out += s.table.to_text(2);
  for (const auto& n : s.notes) out += "  · " + n + "\n";
  return out;
}

std::string render_markdown(const ReportSection& s) {
  std::string out = fmt::format("### {}\n\n", s.title);
  if (!s.table.empty()) out += s.table.to_markdown();
  if (!s.notes.empty()) {
    out += "\n";
    for (const auto& n : s.notes) out += fmt::format("- {}\n", n);
  }
  return out;
}

}  // namespace

std::string format_percent(double ratio) {
  if (!std::isfinite(ratio)) return dash;
  return fmt::format("{:.1f}%", std::fabs(ratio) * 100);
}

std::string profile_status(const ValidationContext& c) {
  if (!c.calibrated) return "datasheet, UNCALIBRATED";
  const Provenance& p = c.measured_on;
  std::vector<std::string> parts;
  for (const std::string* s : {&p.backend, &p.device, &p.date, &p.mode})
    if (!s->empty()) parts.push_back(*s);
  const std::string stale = kernels_freshness(p);
  if (parts.empty()) return stale.empty() ? "calibrated" : "calibrated; " + stale;
  return fmt::format("calibrated, measured on {}{}", fmt::join(parts, ", "), stale.empty() ? "" : "; " + stale);
}

// Replayed ops timed otherwise than the profile's points differ by the method too (eager events
// do not count: every profile times eager ops with them).
std::string op_timing_mismatch(const ValidationContext& c, const ValidationSummary& s) {
  const std::string& fitted = c.measured_on.op_timing;
  if (!c.calibrated || fitted.empty()) return {};
  for (const std::string& t : op_timings(s))
    if (t != "events" && t != fitted)
      return fmt::format("the profile's replayed ops were timed by {}, these by {}: validate with the "
                         "PERFSIM_OP_TIMING it was calibrated with",
                         fitted, t);
  return {};
}

ReportDocument build_validation_document(const ValidationSummary& s, const ValidationContext& c) {
  ReportDocument d;
  d.header.emplace_back("validate", fmt::format("{} ({} scenario file{}{})", c.suite,
                                                c.scenarios.size(),
                                                c.scenarios.size() == 1 ? "" : "s",
                                                c.quick ? ", quick sizes" : ""));
  d.header.emplace_back("device", c.device);
  d.header.emplace_back("backend", c.backend);
  if (!c.measurements.empty())
    d.header.emplace_back("measured", fmt::format("saved in {}, priced again (nothing executed)", c.measurements));
  if (const auto timings = op_timings(s); !timings.empty())
    d.header.emplace_back("op timing", fmt::format("{}", fmt::join(timings, ", ")));
  d.header.emplace_back("profile", fmt::format("{} ({})", c.profile, profile_status(c)));
  if (!c.profile_source.empty()) d.header.emplace_back("profile from", c.profile_source);
  if (c.calibrated && !c.measured_on.device.empty() && c.measured_on.device != c.device)
    d.header.emplace_back("warning", fmt::format("the profile was measured on {}, not on this "
                                                 "device",
                                                 c.measured_on.device));
  if (std::string w = op_timing_mismatch(c, s); !w.empty()) d.header.emplace_back("warning", std::move(w));
  d.header.emplace_back("max error", c.max_error ? format_percent(*c.max_error) +
                                                       " (step time, peak memory, per-op class "
                                                       "medians, speedups, collective medians)"
                                                 : std::string("none (report only)"));
  d.sections.push_back(overall_section(s, c));
  d.sections.push_back(class_section(s));
  if (!s.durations.empty()) d.sections.push_back(duration_section(s));
  d.sections.push_back(step_section(s));
  if (auto issue = host_issue_section(s)) d.sections.push_back(std::move(*issue));
  d.sections.push_back(speedup_section(s));
  if (auto coll = collective_section(s)) d.sections.push_back(std::move(*coll));
  if (c.max_error) d.sections.push_back(over_section(s, *c.max_error));
  return d;
}

std::string format_validation_text(const ValidationSummary& s, const ValidationContext& c) {
  return format_validation_document_text(build_validation_document(s, c));
}

std::string format_validation_document_text(const ReportDocument& d) {
  std::string out = format_key_values(d.header);
  for (const ReportSection& sec : d.sections) {
    out += '\n';
    out += render_text(sec);
  }
  return out;
}

std::string format_validation_markdown(const ValidationSummary& s, const ValidationContext& c) {
  return format_validation_document_markdown(build_validation_document(s, c));
}

std::string format_validation_document_markdown(const ReportDocument& d) {
  std::string out = "## perfsim validate\n\n";
  for (const auto& [k, v] : d.header) out += fmt::format("- **{}**: {}\n", k, v);
  for (const ReportSection& sec : d.sections) {
    out += '\n';
    out += render_markdown(sec);
  }
  return out;
}

std::string format_validation(const ValidationSummary& s, const ValidationContext& c,
                              ReportFormat f) {
  switch (f) {
    case ReportFormat::table: return format_validation_text(s, c);
    case ReportFormat::markdown: return format_validation_markdown(s, c);
    case ReportFormat::json: return format_validation_json(s, c);
    case ReportFormat::csv: return format_validation_csv(s, c);
  }
  return {};
}

}  // namespace perfsim
