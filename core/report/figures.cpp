// Derived report figures (errors, speedups, tokens/s) and format selection. One place computes
// them so every format agrees; the units they print in are core/units.hpp.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/report/report.hpp"
#include "core/text.hpp"

namespace perfsim {

std::optional<ReportFormat> parse_report_format(std::string_view s) {
  const std::string k = to_lower(s);
  if (k == "table" || k == "text" || k == "txt") return ReportFormat::table;
  if (k == "md" || k == "markdown") return ReportFormat::markdown;
  if (k == "json") return ReportFormat::json;
  if (k == "csv") return ReportFormat::csv;
  return std::nullopt;
}

std::optional<ReportFormat> report_format_for_path(std::string_view path) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
    return std::nullopt;
  return parse_report_format(path.substr(dot + 1));
}

std::string_view name_of(ReportFormat f) {
  switch (f) {
    case ReportFormat::table: return "table";
    case ReportFormat::markdown: return "md";
    case ReportFormat::json: return "json";
    case ReportFormat::csv: return "csv";
  }
  return "?";
}

namespace {

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

}  // namespace

std::string unsupported_note(const Prediction& p) {
  if (p.unsupported.empty()) return {};
  std::vector<std::string> priced;
  for (const OpCost& c : p.ops)
    if (!c.supported) {
      const std::string d(name_of(c.priced_as));
      if (std::find(priced.begin(), priced.end(), d) == priced.end()) priced.push_back(d);
    }
  return fmt::format("{} has no {}: priced at {}", p.hardware, join(p.unsupported, "/"),
                     priced.empty() ? std::string("a wider precision") : join(priced, "/"));
}

LayoutFigures layout_figures(const LayoutPrediction& lp) {
  LayoutFigures f;
  f.layout = describe(lp.layout);
  f.gpus = lp.gpus;
  f.pp = lp.layout.pp;
  f.micro_batches = lp.micro_batches;
  f.tokens_per_s_per_gpu = lp.tokens_per_second_per_gpu;
  f.mfu = lp.mfu;
  f.hfu = lp.hfu;
  f.bubble_fraction = lp.bubble_fraction;
  f.communication = lp.communication_time;
  f.exposed_communication = lp.exposed_communication;
  for (const auto& [kind, c] : lp.communication) f.exposed_by_kind[std::string(name_of(kind))] = c.exposed;
  f.worst_rank = lp.worst_rank;
  f.memory_worst = lp.memory_peak;
  f.memory_least = lp.memory_min;
  f.does_not_fit = lp.does_not_fit;
  int64_t layers = 0;
  for (const RankPrediction& r : lp.ranks) layers += r.layers;
  f.stages = describe_stages(layers, lp.layout.pp);
  f.fit_searched = lp.fit_searched;
  f.layouts_that_fit = lp.layouts_that_fit;
  return f;
}

namespace {

// "tp=2 dp=4 zero=1 mb=2 (1,234 tok/s/GPU), …"
std::string fitting_list(const std::vector<FittingLayout>& layouts, const Workload& step_workload) {
  std::vector<std::string> parts;
  for (const FittingLayout& f : layouts) {
    std::string part = describe(f.layout);
    // Inference splits the step's batch over the replicas: its batch follows from dp.
    if (step_workload.phase == Phase::train && f.micro_batch != step_workload.batch)
      part += fmt::format(" mb={}", f.micro_batch);
    parts.push_back(fmt::format("{} ({} tok/s/GPU)", part, format_rate(f.tokens_per_second_per_gpu)));
  }
  return join(parts, ", ");
}

}  // namespace

std::string fitting_layouts_text(const LayoutFigures& l, const Workload& step_workload) {
  if (!l.fit_searched) return {};
  if (l.layouts_that_fit.empty()) return fmt::format("no layout of {} GPUs fits", l.gpus);
  return "fits: " + fitting_list(l.layouts_that_fit, step_workload);
}

std::string fitting_gpus_text(const StepResult& s) {
  if (!s.fit_searched) return {};
  if (s.fit_gpus == 0) return "no layout of up to 1,024 GPUs fits";
  return fmt::format("fits on {} GPUs: {}", s.fit_gpus, fitting_list(s.layouts_that_fit, s.graph.workload));
}

std::vector<StepFigures> step_figures(const RunResult& r) {
  std::vector<StepFigures> out;
  out.reserve(r.steps.size());
  const bool executing = !r.backend.empty() && r.backend != "none";
  for (const StepResult& s : r.steps) {
    StepFigures f;
    f.step = s.step;
    f.tokens_per_step = s.layout ? s.layout->tokens_per_step : s.graph.workload.tokens_per_step();
    if (s.layout) f.layout = layout_figures(*s.layout);
    const Prediction& p = s.predicted;
    f.predicted_time = p.step_time;
    f.predicted_peak_executed = p.memory_executed.peak;
    f.predicted_peak_model = p.memory.peak;
    if (const auto it = p.memory_executed.by_role.find(TensorRole::workspace); it != p.memory_executed.by_role.end())
      f.predicted_workspace = it->second;
    f.host_bytes = p.memory.host_bytes;
    f.host_pinned_bytes = p.memory.host_pinned_bytes;
    f.fits = p.fits;
    f.predicted_tokens_per_s = p.step_time > 0 ? f.tokens_per_step / p.step_time : 0.0;
    f.predicted_mfu = p.mfu;
    const int gpus = s.layout ? std::max(1, s.layout->gpus) : 1;
    f.predicted_model_flops_per_gpu = p.step_time > 0 ? p.model_flops / p.step_time / gpus : 0.0;
    if (s.measured) {
      const Measurement& m = *s.measured;
      f.measured_time = m.step_time;
      f.measured_peak = m.peak_bytes;
      const auto ws = m.bytes_by_role_at_peak.find(TensorRole::workspace);
      f.measured_workspace = ws == m.bytes_by_role_at_peak.end() ? 0.0 : ws->second;
      f.time_error = finite(relative_error(p.step_time, m.step_time));
      f.memory_error = finite(relative_error(p.memory_executed.peak, m.peak_bytes));
      if (m.step_time > 0) {
        f.measured_tokens_per_s = f.tokens_per_step / m.step_time;
        // The step's model FLOPs do not depend on who ran it: only the time differs.
        f.measured_model_flops_per_gpu = p.model_flops / m.step_time / gpus;
        if (p.mfu_peak > 0) f.measured_mfu = *f.measured_model_flops_per_gpu / p.mfu_peak;
      }
    }
    if (!out.empty()) {
      const StepFigures& base = out.front();
      f.predicted_speedup =
          speedup(base.predicted_time, base.tokens_per_step, f.predicted_time, f.tokens_per_step);
      if (base.measured_time && f.measured_time)
        f.measured_speedup = finite(speedup(*base.measured_time, base.tokens_per_step,
                                            *f.measured_time, f.tokens_per_step));
    } else if (f.measured_time) {
      f.measured_speedup = 1.0;
    }
    std::vector<std::string> notes;
    if (executing && !s.measured)
      notes.push_back("not executed: " + (s.not_executed.empty() ? std::string("no measurement")
                                                                  : s.not_executed));
    if (!p.unsupported.empty()) notes.push_back(unsupported_note(p));
    if (f.layout && !f.layout->does_not_fit.empty()) {
      // Beside what does not fit, what would: layouts of the same GPUs.
      const std::string fits = s.fit_searched ? fitting_gpus_text(s) : fitting_layouts_text(*f.layout, s.graph.workload);
      notes.push_back("does not fit: " + f.layout->does_not_fit + (fits.empty() ? "" : "; " + fits));
    }
    if (!s.layout && s.fit_searched)
      notes.push_back(fmt::format("does not fit: needs {} on one GPU; {}", format_bytes(p.memory.peak),
                                  fitting_gpus_text(s)));
    if (s.measured && s.measured->attempts > 1)
      notes.push_back("measured twice: the first run timed some ops at zero");
    f.note = join(notes, "; ");
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<WhatIfFigures> what_if_figures(const RunResult& r) {
  std::vector<std::string> order;  // hardware names in the order the first step lists them
  for (const StepResult& s : r.steps)
    for (const Prediction& p : s.what_if)
      if (std::find(order.begin(), order.end(), p.hardware) == order.end())
        order.push_back(p.hardware);

  std::vector<WhatIfFigures> out;
  for (const std::string& hw : order) {
    bool have_base = false;
    double base_time = 0, base_tokens = 0;  // the first step on this hardware
    for (const StepResult& s : r.steps) {
      for (std::size_t i = 0; i < s.what_if.size(); ++i) {
        const Prediction& p = s.what_if[i];
        if (p.hardware != hw) continue;
        WhatIfFigures w;
        w.hardware = hw;
        w.step = s.step;
        w.step_time = p.step_time;
        const LayoutPrediction* lp = i < s.what_if_layout.size() ? &s.what_if_layout[i] : nullptr;
        const double tokens = lp != nullptr ? lp->tokens_per_step : s.graph.workload.tokens_per_step();
        if (lp != nullptr) w.layout = layout_figures(*lp);
        w.tokens_per_s = p.step_time > 0 ? tokens / p.step_time : 0.0;
        w.peak_model = p.memory.peak;
        w.fits = p.fits;
        w.mfu = p.mfu;
        w.unsupported = p.unsupported;
        w.note = unsupported_note(p);
        if (have_base) {
          w.speedup = speedup(base_time, base_tokens, w.step_time, tokens);
        } else {
          have_base = true;
          base_time = w.step_time;
          base_tokens = tokens;
        }
        out.push_back(std::move(w));
      }
    }
  }
  return out;
}

std::string format_report(const std::vector<RunResult>& points, ReportFormat f) {
  switch (f) {
    case ReportFormat::table: return format_table(points);
    case ReportFormat::markdown: return format_markdown(points);
    case ReportFormat::json: return format_json(points);
    case ReportFormat::csv: return format_csv(points);
  }
  return {};
}

}  // namespace perfsim
