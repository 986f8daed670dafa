// The report as CSV: one row per sweep point × stack step, sweep keys as the leading columns,
// then the step figures, per-class times and the what-if hardware (every figure the text
// report shows). Seconds and bytes; empty
// cells where a value is missing (RFC 4180 quoting). Serving runs have figures of their own
// (serve_csv.cpp): one row per stack step and per what-if hardware.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/report/report.hpp"
#include "core/report/serve_csv.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {


std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.15g}", v) : std::string{}; }
std::string num(const std::optional<double>& v) { return v ? num(*v) : std::string{}; }
std::string flag(bool b) { return b ? "true" : "false"; }

double class_time(const std::map<OpClass, double>& m, OpClass c) {
  auto it = m.find(c);
  return it == m.end() ? 0 : it->second;
}

template <class T>
void add_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}


// Sweep keys lead; "model", "hardware" and "gpus" would repeat a later column's name, so those
// are written sweep_model, sweep_hardware, sweep_gpus; so are keys named as a serve column
// (`later`: a sweep over requests).
std::vector<std::string> sweep_columns(const std::vector<std::string>& keys, const std::vector<std::string>& later) {
  std::vector<std::string> header;
  for (const auto& k : keys) {
    const bool repeats =
        k == "model" || k == "hardware" || k == "gpus" || std::find(later.begin(), later.end(), k) != later.end();
    header.push_back(repeats ? "sweep_" + k : k);
  }
  return header;
}

std::vector<std::string> sweep_cells(const RunResult& r, const std::vector<std::string>& keys) {
  std::vector<std::string> row;
  for (const auto& k : keys) {
    auto it = r.sweep_point.find(k);
    row.push_back(it == r.sweep_point.end() ? "" : it->second);
  }
  return row;
}

bool serving(const RunResult& r) { return !r.serve.empty(); }

// Every point a serving run: the sweep keys and the serve columns only.
std::string serve_csv(const std::vector<RunResult>& points, const std::vector<std::string>& keys) {
  std::vector<std::string> header = sweep_columns(keys, serve_csv_columns());
  header.insert(header.end(), serve_csv_columns().begin(), serve_csv_columns().end());
  std::string out = csv_join(header);
  for (const RunResult& r : points)
    for (const auto& cells : serve_csv_rows(r)) {
      std::vector<std::string> row = sweep_cells(r, keys);
      row.insert(row.end(), cells.begin(), cells.end());
      out += csv_join(row);
    }
  return out;
}

}  // namespace

std::string format_csv(const std::vector<RunResult>& points) {
  std::vector<std::string> keys, hardware;
  bool exec = false, host = false, ws = false, parallel = false;
  for (const RunResult& r : points) {
    for (const StepResult& s : r.steps) host = host || s.predicted.memory.host_bytes > 0;
    for (const StepFigures& f : step_figures(r))
      ws = ws || f.predicted_workspace > 0 || f.measured_workspace.value_or(0) > 0;
    for (const auto& [k, v] : r.sweep_point) add_unique(keys, k);
    for (const auto& s : r.steps) parallel = parallel || s.layout.has_value();
    for (const auto& w : what_if_figures(r)) add_unique(hardware, w.hardware);
    exec = exec || std::any_of(r.steps.begin(), r.steps.end(),
                               [](const StepResult& s) { return s.measured.has_value(); });
  }

  const bool any_serving = std::any_of(points.begin(), points.end(), serving);
  if (any_serving && std::all_of(points.begin(), points.end(), serving)) return serve_csv(points, keys);

  std::vector<std::string> header = sweep_columns(keys, any_serving ? serve_csv_columns() : std::vector<std::string>{});
  for (const char* h : {"scenario", "step", "model", "workload", "backend", "device", "hardware",
                        "calibrated", "tokens_per_step", "predicted_step_s", "measured_step_s",
                        "time_error", "predicted_peak_executed_bytes", "measured_peak_bytes",
                        "memory_error", "predicted_peak_model_bytes", "fits", "predicted_speedup",
                        "measured_speedup", "predicted_tokens_per_s", "measured_tokens_per_s",
                        "predicted_mfu", "measured_mfu", "predicted_model_flops_s_per_gpu",
                        "measured_model_flops_s_per_gpu", "note", "layers_built", "layers_total"})
    header.emplace_back(h);
  // Host memory columns only when some graph holds data in host memory.
  if (host) header.insert(header.end(), {"predicted_host_bytes", "predicted_host_pinned_bytes"});
  // Workspace columns only when some executed peak holds kernel or library workspace.
  if (ws) header.insert(header.end(), {"predicted_workspace_bytes", "measured_workspace_bytes"});
  // Layout columns only when some step runs on several GPUs.
  if (parallel)
    header.insert(header.end(), {"layout", "gpus", "predicted_tokens_per_s_per_gpu", "predicted_hfu",
                                 "bubble_fraction", "communication_s", "exposed_communication_s",
                                 "worst_rank", "memory_worst_rank_bytes", "memory_least_rank_bytes"});
  for (OpClass c : all_op_classes) header.push_back(fmt::format("predicted_{}_s", name_of(c)));
  if (exec)
    for (OpClass c : all_op_classes) header.push_back(fmt::format("measured_{}_s", name_of(c)));
  for (const auto& hw : hardware)
    for (const char* h : {"_step_s", "_tokens_per_s", "_speedup", "_mfu", "_peak_model_bytes",
                          "_fits", "_note"})
      header.push_back(hw + h);

  // A file has one header, so a report mixing serving and other runs (a sweep whose points differ
  // in workload) appends the serve columns: serving rows fill them and the step columns they
  // share (scenario, step, model, workload, backend, device, hardware), other rows leave them
  // empty.
  if (any_serving)
    for (const std::string& c : serve_csv_columns())
      if (c != "step" && c != "hardware") header.push_back(c);
  auto column = [&header, &keys](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin() + static_cast<std::ptrdiff_t>(keys.size()),
                                              header.end(), name) -
                                    header.begin());
  };
  std::string out = csv_join(header);

  for (const RunResult& r : points) {
    if (serving(r)) {
      for (const auto& cells : serve_csv_rows(r)) {
        std::vector<std::string> row = sweep_cells(r, keys);
        row.resize(header.size());
        row[column("scenario")] = r.scenario;
        row[column("model")] = r.model;
        row[column("workload")] = r.workload;
        row[column("backend")] = r.backend;
        row[column("device")] = r.device;
        for (std::size_t c = 0; c < cells.size(); ++c) row[column(serve_csv_columns()[c])] = cells[c];
        out += csv_join(row);
      }
      continue;
    }
    const auto figs = step_figures(r);
    const auto wi = what_if_figures(r);
    for (std::size_t i = 0; i < r.steps.size(); ++i) {
      const StepResult& s = r.steps[i];
      const StepFigures& f = figs[i];
      std::vector<std::string> row = sweep_cells(r, keys);
      row.insert(row.end(),
                 {r.scenario, s.step, r.model, r.workload, r.backend, r.device, s.predicted.hardware,
                  flag(s.predicted.calibrated), num(f.tokens_per_step), num(f.predicted_time),
                  num(f.measured_time), num(f.time_error), num(f.predicted_peak_executed),
                  num(f.measured_peak), num(f.memory_error), num(f.predicted_peak_model),
                  flag(f.fits), num(f.predicted_speedup), num(f.measured_speedup),
                  num(f.predicted_tokens_per_s), num(f.measured_tokens_per_s),
                  num(s.predicted.mfu), num(f.measured_mfu), num(f.predicted_model_flops_per_gpu),
                  num(f.measured_model_flops_per_gpu), f.note, std::to_string(s.graph.layers_built),
                  std::to_string(s.graph.layers_total)});
      if (host) row.insert(row.end(), {num(f.host_bytes), num(f.host_pinned_bytes)});
      if (ws) row.insert(row.end(), {num(f.predicted_workspace), num(f.measured_workspace)});
      if (parallel) {
        if (f.layout) {
          const LayoutFigures& l = *f.layout;
          row.insert(row.end(), {l.layout, std::to_string(l.gpus), num(l.tokens_per_s_per_gpu), num(l.hfu),
                                 num(l.bubble_fraction), num(l.communication), num(l.exposed_communication),
                                 std::to_string(l.worst_rank), num(l.memory_worst), num(l.memory_least)});
        } else {
          row.insert(row.end(), {"single GPU", "1", num(f.predicted_tokens_per_s), num(s.predicted.hfu), "0", "0",
                                 "0", "0", num(f.predicted_peak_model), num(f.predicted_peak_model)});
        }
      }
      for (OpClass c : all_op_classes) row.push_back(num(class_time(s.predicted.time_by_class, c)));
      if (exec)
        for (OpClass c : all_op_classes)
          row.push_back(s.measured ? num(class_time(s.measured->time_by_class, c)) : "");
      for (const auto& hw : hardware) {
        // what_if_figures lists each hardware's steps in order; the i-th of them is step i
        // (matched by position: two steps may share a name).
        const WhatIfFigures* w = nullptr;
        std::size_t seen = 0;
        for (const WhatIfFigures& x : wi)
          if (x.hardware == hw && seen++ == i) w = &x;
        if (w == nullptr || w->step != s.step) {
          row.insert(row.end(), {"", "", "", "", "", "", ""});
        } else {
          row.insert(row.end(), {num(w->step_time), num(w->tokens_per_s), num(w->speedup),
                                 num(w->mfu), num(w->peak_model), flag(w->fits), w->note});
        }
      }
      row.resize(header.size());  // the serve columns of a mixed report
      out += csv_join(row);
    }
  }
  return out;
}

}  // namespace perfsim
