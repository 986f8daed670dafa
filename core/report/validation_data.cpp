// The `perfsim validate` report as JSON (everything, per-op rows included) and CSV (one row
// per figure: overall statistics, op classes, steps, memory, speedups, collectives). Seconds, bytes and
// ratios (0.05 = 5%); missing values are null (JSON) or empty cells (CSV).
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/report/validation.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json opt(const std::optional<double>& v) { return v ? num(*v) : json(nullptr); }

json stats_json(const ErrorStats& s) {
  json j;
  j["count"] = s.count;
  j["median"] = s.count ? num(s.median) : json(nullptr);
  j["p90"] = s.count ? num(s.p90) : json(nullptr);
  j["max"] = s.count ? num(s.max) : json(nullptr);
  return j;
}

json op_json(const OpError& e) {
  json j;
  j["scenario"] = e.scenario;
  j["step"] = e.step;
  j["op"] = e.op;
  j["kind"] = std::string(name_of(e.kind));
  j["class"] = std::string(name_of(e.op_class));
  j["predicted_s"] = num(e.predicted);
  j["measured_s"] = num(e.measured);
  j["measured_in_step_s"] = num(e.measured_in_step);
  j["error"] = num(e.error);
  if (e.measured_host > 0) {
    j["predicted_dispatch_s"] = num(e.predicted_dispatch);
    j["measured_host_s"] = num(e.measured_host);
  }
  return j;
}

json collective_json(const CollectiveError& e) {
  json j;
  j["collective"] = std::string(name_of(e.collective));
  if (!e.op.empty()) j["op"] = e.op;
  j["gpus"] = e.group;
  j["bytes"] = num(e.payload);
  j["predicted_s"] = num(e.predicted);
  j["measured_s"] = num(e.measured);
  j["error"] = num(e.error);
  return j;
}

std::string cell(double v) { return std::isfinite(v) ? fmt::format("{:.15g}", v) : std::string{}; }
std::string cell(const std::optional<double>& v) { return v ? cell(*v) : std::string{}; }

struct CsvRow {
  std::string figure, scenario, step, subject;
  std::string count, predicted, measured, error, median, p90, max;
};

std::string csv_line(const CsvRow& r) {
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", csv_quote(r.figure), csv_quote(r.scenario),
                     csv_quote(r.step), csv_quote(r.subject), r.count, r.predicted, r.measured, r.error,
                     r.median, r.p90, r.max);
}

CsvRow stats_row(std::string figure, std::string subject, const ErrorStats& s) {
  CsvRow r;
  r.figure = std::move(figure);
  r.subject = std::move(subject);
  r.count = std::to_string(s.count);
  if (s.count) r.median = cell(s.median), r.p90 = cell(s.p90), r.max = cell(s.max);
  return r;
}

// The profile that priced the predictions, and where a calibrated one was measured.
json profile_json(const ValidationContext& c) {
  json p;
  p["name"] = c.profile;
  p["calibrated"] = c.calibrated;
  p["status"] = profile_status(c);
  p["source"] = c.profile_source;
  if (c.calibrated) {
    json& m = p["measured_on"];
    m["backend"] = c.measured_on.backend;
    m["device"] = c.measured_on.device;
    m["driver"] = c.measured_on.driver;
    m["runtime"] = c.measured_on.runtime;
    m["date"] = c.measured_on.date;
    m["mode"] = c.measured_on.mode;
  }
  return p;
}

}  // namespace

std::string format_validation_json(const ValidationSummary& s, const ValidationContext& c) {
  json root;
  json& h = root["validate"];
  h["suite"] = c.suite;
  h["scenarios"] = c.scenarios;
  h["quick"] = c.quick;
  h["device"] = c.device;
  h["backend"] = c.backend;
  h["catalog"] = c.catalog;
  if (!c.measurements.empty()) h["measurements"] = c.measurements;
  h["profile"] = profile_json(c);
  h["max_error"] = c.max_error ? num(*c.max_error) : json(nullptr);

  json& o = root["overall"];
  o["per_op_time"] = stats_json(s.all_ops);
  o["step_time"] = stats_json(s.step_time);
  o["speedup"] = stats_json(s.speedup);
  o["peak_memory"] = stats_json(s.memory);
  o["collective_time"] = stats_json(s.all_collectives);
  o["unmeasured_steps"] = s.unmeasured_steps;
  o["held_ops"] = s.held_ops;

  json classes = json::array();
  for (const ClassValidation& cv : s.classes) {
    json j;
    j["class"] = std::string(name_of(cv.op_class));
    j["stats"] = stats_json(cv.stats);
    j["worst"] = op_json(cv.worst);
    classes.push_back(std::move(j));
  }
  root["classes"] = std::move(classes);

  json durations = json::array();
  for (const DurationValidation& dv : s.durations) {
    json j;
    j["op_time"] = dv.band.label;
    j["from_s"] = num(dv.band.low);
    j["below_s"] = num(dv.band.high);  // null: no upper bound
    j["stats"] = stats_json(dv.stats);
    j["worst"] = op_json(dv.worst);
    durations.push_back(std::move(j));
  }
  root["op_times"] = std::move(durations);

  json steps = json::array();
  for (const StepValidation& v : s.steps) {
    json j;
    j["scenario"] = v.scenario;
    j["step"] = v.step;
    j["predicted_s"] = num(v.predicted_time);
    j["measured_s"] = opt(v.measured_time);
    j["time_error"] = opt(v.time_error);
    j["predicted_peak_bytes"] = num(v.predicted_peak);
    j["measured_peak_bytes"] = opt(v.measured_peak);
    j["memory_error"] = opt(v.memory_error);
    j["timed_runs"] = v.measured_time && v.timed_runs > 0 ? json(v.timed_runs) : json(nullptr);
    j["op_timing"] = v.measured_time && !v.op_timing.empty() ? json(v.op_timing) : json(nullptr);
    j["predicted_host_issue_s"] = opt(v.predicted_issue);
    j["measured_host_issue_s"] = opt(v.measured_issue);
    j["host_issue_error"] = opt(v.issue_error);
    j["not_executed"] = v.note.empty() ? json(nullptr) : json(v.note);
    steps.push_back(std::move(j));
  }
  root["steps"] = std::move(steps);

  json speedups = json::array();
  for (const SpeedupValidation& sp : s.speedups) {
    json j;
    j["scenario"] = sp.scenario;
    j["step"] = sp.step;
    j["over"] = sp.previous;
    j["predicted"] = num(sp.predicted);
    j["measured"] = num(sp.measured);
    j["error"] = num(sp.error);
    speedups.push_back(std::move(j));
  }
  root["speedups"] = std::move(speedups);

  json& coll = root["collectives"];
  coll["skipped"] = s.collectives_skipped.empty() ? json(nullptr) : json(s.collectives_skipped);
  coll["source"] = s.collectives_in_steps ? "steps" : "timed";
  json per = json::array();
  for (const CollectiveValidation& cv : s.collectives)
    per.push_back({{"collective", std::string(name_of(cv.collective))}, {"stats", stats_json(cv.stats)}});
  coll["by_collective"] = std::move(per);
  json points = json::array();
  for (const CollectiveError& e : s.collective_errors) points.push_back(collective_json(e));
  coll["points"] = std::move(points);

  if (c.max_error) {
    json over = json::array();
    for (const CheckedFigure& cf : figures_over(s, *c.max_error))
      over.push_back({{"figure", cf.what}, {"where", cf.where}, {"error", num(cf.error)}});
    root["over_max_error"] = std::move(over);
  }

  json ops = json::array();
  for (const OpError& e : s.ops) ops.push_back(op_json(e));
  root["ops"] = std::move(ops);
  return root.dump(2) + "\n";
}

// The header's facts (device, profile) are in the text and JSON reports; CSV rows hold figures.
std::string format_validation_csv(const ValidationSummary& s, const ValidationContext&) {
  std::string out =
      "figure,scenario,step,subject,count,predicted,measured,error,median_abs,p90_abs,max_abs\n";
  out += csv_line(stats_row("overall", "per-op time", s.all_ops));
  out += csv_line(stats_row("overall", "step time", s.step_time));
  out += csv_line(stats_row("overall", "speedup", s.speedup));
  out += csv_line(stats_row("overall", "peak memory", s.memory));
  if (!s.collective_errors.empty()) out += csv_line(stats_row("overall", "collective time", s.all_collectives));
  for (const ClassValidation& cv : s.classes)
    out += csv_line(stats_row("op_class", std::string(name_of(cv.op_class)), cv.stats));
  for (const DurationValidation& dv : s.durations) out += csv_line(stats_row("op_time", dv.band.label, dv.stats));
  for (const CollectiveValidation& cv : s.collectives)
    out += csv_line(stats_row("collective", std::string(name_of(cv.collective)), cv.stats));
  for (const StepValidation& v : s.steps) {
    out += csv_line({"step_time", v.scenario, v.step, v.note, "", cell(v.predicted_time),
                     cell(v.measured_time), cell(v.time_error), "", "", ""});
    out += csv_line({"peak_memory", v.scenario, v.step, v.note, "", cell(v.predicted_peak),
                     cell(v.measured_peak), cell(v.memory_error), "", "", ""});
    if (v.issue_error)
      out += csv_line({"host_issue", v.scenario, v.step, "", "", cell(v.predicted_issue), cell(v.measured_issue),
                       cell(v.issue_error), "", "", ""});
  }
  for (const SpeedupValidation& sp : s.speedups)
    out += csv_line({"speedup", sp.scenario, sp.step, sp.previous, "", cell(sp.predicted),
                     cell(sp.measured), cell(sp.error), "", "", ""});
  // Collective rows: scenario = the collective, step = its GPUs, subject = the buffer's bytes.
  for (const CollectiveError& e : s.collective_errors)
    out += csv_line({"collective_time", std::string(name_of(e.collective)), fmt::format("{} GPUs", e.group),
                     fmt::format("{:.0f} bytes", e.payload), "", cell(e.predicted), cell(e.measured), cell(e.error),
                     "", "", ""});
  return out;
}

std::string format_runs_comparison_json(const std::vector<ValidationSummary>& runs, const RunsComparison& c,
                                        const RunsContext& ctx) {
  const ValidationContext& b = ctx.base;
  json root;
  json& h = root["validate"];
  h["suite"] = b.suite;
  h["scenarios"] = b.scenarios;
  h["quick"] = b.quick;
  h["measurements"] = ctx.files;
  h["profile"] = profile_json(b);
  h["op_error"] = num(c.op_error);
  json list = json::array();
  for (std::size_t r = 0; r < runs.size(); ++r) {
    json j;
    j["measurements"] = ctx.files[r];
    j["device"] = ctx.devices[r];
    j["per_op_time"] = stats_json(runs[r].all_ops);
    j["ops_over"] = c.over[r];
    j["step_time"] = stats_json(runs[r].step_time);
    j["speedup"] = stats_json(runs[r].speedup);
    j["peak_memory"] = stats_json(runs[r].memory);
    list.push_back(std::move(j));
  }
  root["runs"] = std::move(list);
  json& cmp = root["comparison"];
  cmp["compared_ops"] = c.compared;
  cmp["over_in_some_runs"] = c.some_runs;
  cmp["measured_spread"] = stats_json(c.measured_spread);
  json every = json::array();
  for (const OpAcrossRuns& o : c.every_run) {
    json j;
    j["scenario"] = o.scenario;
    j["step"] = o.step;
    j["op"] = o.op;
    j["kind"] = std::string(name_of(o.kind));
    json errors = json::array();
    for (double e : o.errors) errors.push_back(num(e));
    j["errors"] = std::move(errors);
    j["mean_error"] = num(o.mean());
    every.push_back(std::move(j));
  }
  cmp["over_in_every_run"] = std::move(every);
  return root.dump(2) + "\n";
}


}  // namespace perfsim
