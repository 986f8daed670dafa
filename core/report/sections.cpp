// Builds the report document of one RunResult: header lines, the step table (time and
// throughput), peak memory, time per op class, what-if hardware; and the sweep summary.
#include "core/report/sections.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/report/report.hpp"

namespace perfsim {

std::string format_params(double params) {
  if (params >= 1e9) return fmt::format("{:.2f} B params", params / 1e9);
  if (params >= 1e6) return format_sig3(params / 1e6) + " M params";
  return format_rate(params) + " params";
}

namespace {

constexpr const char* dash = "—";

bool is_executing(const RunResult& r) { return !r.backend.empty() && r.backend != "none"; }

std::string opt_duration(const std::optional<double>& v) { return v ? format_duration(*v) : dash; }
std::string opt_percent(const std::optional<double>& v) { return v ? format_signed_percent(*v) : dash; }
std::string opt_speedup(const std::optional<double>& v) { return v ? format_speedup(*v) : dash; }
std::string opt_rate(const std::optional<double>& v) { return v ? format_rate(*v) : dash; }
std::string opt_bytes(const std::optional<double>& v) { return v ? format_bytes(*v) : dash; }

// How the measured steps were timed: "medians of 10 timed runs per step", or their range
// when execute.min_time gave the steps different counts. Empty when nothing ran.
std::string timing_text(const RunResult& r) {
  int fewest = 0, most = 0;
  for (const StepResult& s : r.steps) {
    if (!s.measured) continue;
    const int n = s.measured->repeats;
    if (most == 0) fewest = n;
    fewest = std::min(fewest, n), most = std::max(most, n);
  }
  if (most == 0) return {};
  const std::string runs = fewest == most ? fmt::format("{}", most) : fmt::format("{}-{}", fewest, most);
  std::string text = fmt::format("medians of {} timed run{} per step", runs, most == 1 ? "" : "s");
  std::vector<std::string> methods;  // of the ops' device times
  for (const StepResult& s : r.steps)
    if (s.measured && !s.measured->op_timing.empty() &&
        std::find(methods.begin(), methods.end(), s.measured->op_timing) == methods.end())
      methods.push_back(s.measured->op_timing);
  if (!methods.empty()) text += fmt::format("; ops' device times from {}", fmt::join(methods, " and "));
  return text;
}

// "41.2% (129 TFLOP/s)": utilisation and the model FLOPs per second per GPU behind it.
std::string mfu_text(double mfu, double flops_per_gpu) {
  return fmt::format("{:.1f}% ({})", mfu * 100, format_flops_rate(flops_per_gpu));
}

std::string primary_hardware(const RunResult& r) {
  return r.steps.empty() ? std::string("?") : r.steps.front().predicted.hardware;
}

ReportSection step_time_section(const RunResult& r, const std::vector<StepFigures>& figs) {
  const bool exec = is_executing(r);
  bool any_note = false;
  for (const auto& f : figs) any_note = any_note || !f.note.empty();

  ReportSection s;
  s.title = fmt::format("Step time and throughput (full model) — predicted on {}{}",
                        primary_hardware(r), exec ? ", measured on " + r.backend : "");
  TextTable& t = s.table;
  t.add_column("step", Align::left);
  t.add_column("pred time");
  if (exec) t.add_column("meas time"), t.add_column("time err"), t.add_column("spread");
  t.add_column("pred speedup");
  if (exec) t.add_column("meas speedup");
  t.add_column(fmt::format("pred {}/s", r.unit));
  if (exec) t.add_column(fmt::format("meas {}/s", r.unit));
  t.add_column("pred MFU");
  if (exec) t.add_column("meas MFU");
  if (any_note) t.add_column("note", Align::left);
  int repeats = 0;
  for (std::size_t i = 0; i < figs.size(); ++i) {
    const auto& f = figs[i];
    std::vector<std::string> row{f.step, format_duration(f.predicted_time)};
    if (exec) row.push_back(opt_duration(f.measured_time)), row.push_back(opt_percent(f.time_error));
    if (exec) {
      const std::optional<double> spread = i < r.steps.size() ? repeat_spread(r.steps[i]) : std::nullopt;
      row.push_back(spread ? fmt::format("{:.1f}%", *spread * 100) : dash);
      if (spread) repeats = std::max(repeats, r.steps[i].measured->repeats);
    }
    row.push_back(format_speedup(f.predicted_speedup));
    if (exec) row.push_back(opt_speedup(f.measured_speedup));
    row.push_back(format_rate(f.predicted_tokens_per_s));
    if (exec) row.push_back(opt_rate(f.measured_tokens_per_s));
    row.push_back(mfu_text(f.predicted_mfu, f.predicted_model_flops_per_gpu));
    if (exec)
      row.push_back(f.measured_mfu ? mfu_text(*f.measured_mfu, f.measured_model_flops_per_gpu.value_or(0)) : dash);
    if (any_note) row.push_back(f.note);
    t.add_row(std::move(row));
  }
  s.notes.push_back(r.unit == "img" ? "speedup: throughput (images/s) relative to the first step"
                                    : "speedup: throughput (tokens/s) relative to the first step");
  // Speculative steps: their time is one verify pass, their tokens the pass's expected yield.
  for (const StepResult& st : r.steps) {
    const Workload& w = st.graph.workload;
    if (w.phase != Phase::decode || w.draft_tokens <= 0) continue;
    s.notes.push_back(fmt::format(
        "{}: speculative, {} draft tokens a step at acceptance {}: one verify pass of {} tokens per sequence yields "
        "{:.3g} on average, (1 − α^(k+1)) / (1 − α); tok/s counts those{}",
        st.step, w.draft_tokens, w.acceptance, w.draft_tokens + 1,
        speculative_tokens_per_step(w.acceptance, w.draft_tokens), exec ? " (measured too: the pass is timed, the yield expected)" : ""));
  }
  if (exec) s.notes.push_back("time err: (predicted − measured) / measured");
  if (exec && repeats > 0)
    s.notes.push_back(fmt::format(
        "spread: how much the {} timed repeats varied, (median − fastest) / median of the step with each op at its "
        "median and at its fastest repeat; above {:.0f}% the time err is within the noise",
        repeats, large_repeat_spread * 100));
  s.notes.push_back("MFU: model FLOP/s per GPU (in brackets: matrix products, no recomputation) over the dense "
                    "peak at the step's precision");
  return s;
}

// "all_reduce 12.0 ms, send_recv 3.10 ms": the kinds the step waits for, most first.
std::string exposed_kinds(const LayoutFigures& l) {
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [name, seconds] : l.exposed_by_kind)
    if (seconds > 0) kinds.emplace_back(seconds, name);
  std::sort(kinds.rbegin(), kinds.rend());
  std::vector<std::string> parts;
  for (const auto& [seconds, name] : kinds) parts.push_back(name + " " + format_duration(seconds));
  return parts.empty() ? std::string(dash) : fmt::format("{}", fmt::join(parts, ", "));
}

ReportSection layout_section(const RunResult& r, const std::vector<StepFigures>& figs) {
  ReportSection s;
  s.title = fmt::format("Parallel layout — predicted on {}", primary_hardware(r));
  TextTable& t = s.table;
  t.add_column("step", Align::left);
  t.add_column("layout", Align::left);
  t.add_column("GPUs");
  t.add_column(fmt::format("{}/s/GPU", r.unit));
  t.add_column("MFU");
  t.add_column("bubble");
  t.add_column("comm");
  t.add_column("exposed");
  t.add_column("exposed by kind", Align::left);
  t.add_column("mem/rank max");
  t.add_column("min");
  bool any_hfu = false;
  for (const auto& f : figs) {
    if (!f.layout) {
      t.add_row({f.step, "single GPU", "1", format_rate(f.predicted_tokens_per_s), dash, dash, dash, dash, dash,
                 format_bytes(f.predicted_peak_model), format_bytes(f.predicted_peak_model)});
      continue;
    }
    const LayoutFigures& l = *f.layout;
    std::string mfu = fmt::format("{:.1f}%", l.mfu * 100);
    if (std::abs(l.hfu - l.mfu) > 1e-3) {
      mfu += fmt::format(" ({:.1f}%)", l.hfu * 100);
      any_hfu = true;
    }
    t.add_row({f.step, l.layout, fmt::format("{}", l.gpus), format_rate(l.tokens_per_s_per_gpu), mfu,
               l.bubble_fraction > 0 ? fmt::format("{:.1f}%", l.bubble_fraction * 100) : std::string(dash),
               format_duration(l.communication), format_duration(l.exposed_communication), exposed_kinds(l),
               format_bytes(l.memory_worst), format_bytes(l.memory_least)});
  }
  s.notes.push_back(r.unit == "img" ? "img/s/GPU: every replica's images per second over every GPU of the layout"
                                    : "tok/s/GPU: every replica's tokens per second over every GPU of the layout");
  if (any_hfu)
    s.notes.push_back("MFU (HFU): HFU also counts the products recomputed (recompute, flash attention's backward)");
  // An inference pipeline's bubble is no simulated schedule: one batch passes the stages in turn.
  const bool inference_pipeline = std::any_of(r.steps.begin(), r.steps.end(), [](const StepResult& st) {
    return st.layout && st.layout->layout.pp > 1 && st.graph.workload.phase != Phase::train;
  });
  s.notes.push_back(inference_pipeline
                        ? "bubble: the share of the step the busiest pipeline stage waits (training: simulated "
                          "schedule; inference: the batch passes the stages in turn)"
                        : "bubble: the share of the step the busiest pipeline stage waits (simulated schedule)");
  s.notes.push_back("comm: collectives of the rank that communicates most; exposed: what the step waits for");
  s.notes.push_back("exposed by kind: how much shorter the step would be were that kind free");
  s.notes.push_back("mem/rank: peak per GPU on the most and least loaded pipeline stage");
  // Uneven stages (the first layers % pp take one more layer), one line per split; the steps are
  // named when the pipelined steps do not all split alike.
  std::vector<std::pair<std::string, std::vector<std::string>>> splits;
  std::size_t pipelined = 0;
  for (const auto& f : figs) {
    if (!f.layout || f.layout->pp == 1) continue;
    ++pipelined;
    if (f.layout->stages.empty()) continue;
    auto it = std::find_if(splits.begin(), splits.end(), [&](const auto& x) { return x.first == f.layout->stages; });
    if (it == splits.end()) it = splits.insert(splits.end(), {f.layout->stages, {}});
    it->second.push_back(f.step);
  }
  for (const auto& [text, steps] : splits)
    s.notes.push_back(splits.size() == 1 && steps.size() == pipelined
                          ? "stages: " + text
                          : fmt::format("stages of {}: {}", fmt::join(steps, ", "), text));
  return s;
}

ReportSection memory_section(const RunResult& r, const std::vector<StepFigures>& figs) {
  const bool exec = is_executing(r);
  ReportSection s;
  s.title = "Peak memory";
  TextTable& t = s.table;
  t.add_column("step", Align::left);
  t.add_column("pred exec peak");
  if (exec) t.add_column("meas exec peak"), t.add_column("mem err");
  t.add_column("pred model peak");
  // Host memory shows only for graphs that hold data on the host (host_data).
  const bool host = std::any_of(figs.begin(), figs.end(),
                                [](const StepFigures& f) { return f.host_bytes > 0; });
  if (host) t.add_column("host (pinned)");
  // Workspace shows only when some step's executed peak holds any (GPU profiles).
  const bool ws = std::any_of(figs.begin(), figs.end(), [](const StepFigures& f) {
    return f.predicted_workspace > 0 || f.measured_workspace.value_or(0) > 0;
  });
  if (ws) {
    t.add_column("pred workspace");
    if (exec) t.add_column("meas workspace");
  }
  t.add_column("fits " + primary_hardware(r), Align::left);
  for (const auto& f : figs) {
    std::vector<std::string> row{f.step, format_bytes(f.predicted_peak_executed)};
    if (exec) row.push_back(opt_bytes(f.measured_peak)), row.push_back(opt_percent(f.memory_error));
    row.push_back(format_bytes(f.predicted_peak_model));
    if (host)
      row.push_back(fmt::format("{} ({})", format_bytes(f.host_bytes),
                                format_bytes(f.host_pinned_bytes)));
    if (ws) {
      row.push_back(format_bytes(f.predicted_workspace));
      if (exec) row.push_back(opt_bytes(f.measured_workspace));
    }
    row.push_back(f.fits ? "yes" : "does not fit");
    t.add_row(std::move(row));
  }
  s.notes.push_back("exec peak: the graph as built (sampled layers), as the backend allocates it");
  s.notes.push_back("model peak: predicted for every layer of the model");
  if (host)
    s.notes.push_back("host: input buffers in host memory (pinned part in brackets), not in the "
                      "device peaks");
  if (ws)
    s.notes.push_back("workspace: kernel and library workspaces in the exec peak (part of it)");
  return s;
}

ReportSection class_section(const RunResult& r) {
  const bool exec = is_executing(r);
  ReportSection s;
  s.title = exec ? "Time by op class (full model), predicted / measured"
                 : "Time by op class (full model), predicted";
  TextTable& t = s.table;
  t.add_column("class", Align::left);
  for (const StepResult& st : r.steps) t.add_column(st.step);
  for (OpClass c : all_op_classes) {
    bool present = false;
    for (const StepResult& st : r.steps) {
      const auto& pc = st.predicted.time_by_class;
      auto it = pc.find(c);
      present = present || (it != pc.end() && it->second > 0);
      if (st.measured) {
        auto mt = st.measured->time_by_class.find(c);
        present = present || (mt != st.measured->time_by_class.end() && mt->second > 0);
      }
    }
    if (!present) continue;
    std::vector<std::string> row{std::string(name_of(c))};
    for (const StepResult& st : r.steps) {
      auto it = st.predicted.time_by_class.find(c);
      const double pred = it == st.predicted.time_by_class.end() ? 0 : it->second;
      std::string cell = format_duration(pred);
      if (exec) {
        std::string meas = dash;
        if (st.measured) {
          auto mt = st.measured->time_by_class.find(c);
          meas = format_duration(mt == st.measured->time_by_class.end() ? 0 : mt->second);
        }
        cell += " / " + meas;
      }
      row.push_back(std::move(cell));
    }
    t.add_row(std::move(row));
  }
  s.notes.push_back("per class: Σ op time × count; the step time also holds host overhead");
  return s;
}

ReportSection what_if_section(const std::vector<WhatIfFigures>& wi, const std::string& unit) {
  ReportSection s;
  s.title = "What-if on other hardware (predicted)";
  TextTable& t = s.table;
  t.add_column("hardware", Align::left);
  t.add_column("step", Align::left);
  t.add_column("step time");
  t.add_column(fmt::format("{}/s", unit));
  t.add_column("speedup");
  t.add_column("MFU");
  t.add_column("model peak");
  t.add_column("fits", Align::left);
  bool any_note = false;
  for (const auto& w : wi) any_note = any_note || !w.note.empty();
  if (any_note) t.add_column("note", Align::left);
  for (const auto& w : wi) {
    std::vector<std::string> row{w.hardware,
                                 w.step,
                                 format_duration(w.step_time),
                                 format_rate(w.tokens_per_s),
                                 format_speedup(w.speedup),
                                 fmt::format("{:.1f}%", w.mfu * 100),
                                 format_bytes(w.peak_model),
                                 w.fits ? "yes" : "does not fit"};
    if (any_note) row.push_back(w.note);
    t.add_row(std::move(row));
  }
  s.notes.push_back("speedup: throughput relative to the first step on the same hardware");
  return s;
}

// How to get a measured profile, for the header of a run that executed on a device priced
// from figures not measured there (or from the quick first-use calibration of a CPU); "" when
// the profile was calibrated on purpose or nothing executed.
std::string calibration_hint(const RunResult& r, const Prediction& p) {
  if (!is_executing(r)) return "";
  const bool cpu = r.backend == "cpu";
  const std::string make = fmt::format("perfsim calibrate{} -o {}.lua", cpu ? " --backend cpu" : "",
                                       cpu ? "my-cpu" : "my-gpu");
  if (p.hardware == "host-cpu-cached")
    return fmt::format("a quick calibration of this CPU made on first use, kept in perfsim's cache folder "
                       "(~/.cache/perfsim); `{}` measures a full one (then --profile my-cpu.lua)",
                       make);
  if (p.calibrated) return "";
  return fmt::format("the profile is {}, not measured here: errors of tens of percent are usual; `{}` measures "
                     "this {} (then --profile {}.lua){}",
                     cpu ? "estimated from /proc/cpuinfo" : "the datasheet's", make, cpu ? "CPU" : "GPU",
                     cpu ? "my-cpu" : "my-gpu", cpu ? ", or run without --no-cache to calibrate it once" : "");
}

}  // namespace

ReportDocument build_report_document(const RunResult& r, std::size_t index, std::size_t count) {
  ReportDocument d;
  std::string scenario = r.scenario;
  if (!r.description.empty()) scenario += " — " + r.description;
  d.header.emplace_back("scenario", scenario);
  if (!r.file.empty()) d.header.emplace_back("file", r.file);
  if (count > 1 || !r.sweep_point.empty())
    d.header.emplace_back("sweep", fmt::format("{} (point {} of {})", sweep_label(r.sweep_point),
                                               index + 1, count));
  std::string params = r.model_params > 0 ? format_params(static_cast<double>(r.model_params)) : "";
  if (r.model_active_params > 0 && r.model_active_params < r.model_params)
    params += ", " + format_params(static_cast<double>(r.model_active_params)) + " active";
  d.header.emplace_back("model", params.empty() ? r.model : fmt::format("{} ({})", r.model, params));
  d.header.emplace_back("workload", r.workload);
  d.header.emplace_back("backend", is_executing(r)
                                       ? (r.device.empty() ? r.backend : r.backend + " — " + r.device)
                                       : std::string("none (prediction only)"));
  if (!r.steps.empty()) {
    const Prediction& p = r.steps.front().predicted;
    d.header.emplace_back("profile", fmt::format("{} ({})", p.hardware,
                                                 p.profile));
    if (const std::string hint = calibration_hint(r, p); !hint.empty()) d.header.emplace_back("accuracy", hint);
  }
  if (!r.sampling.empty()) d.header.emplace_back("sampling", r.sampling);
  if (r.unsafe) d.header.emplace_back("unsafe", "scripts ran without the sandbox (--unsafe)");
  if (const std::string t = timing_text(r); !t.empty()) d.header.emplace_back("timing", t);

  if (!r.serve.empty()) {
    d.header.emplace_back("profile", fmt::format("{} ({})", r.serve.front().hardware, r.serve.front().profile));
    int64_t drawn = 0;
    for (const ServeStepResult& st : r.serve) drawn = std::max(drawn, st.predicted.metrics.requests);
    d.header.emplace_back("engine", fmt::format("{} requests drawn once, through each step's engine", drawn));
    for (ReportSection& s : serve_sections(r)) d.sections.push_back(std::move(s));
    return d;
  }
  if (r.steps.empty()) return d;
  const auto figs = step_figures(r);
  d.sections.push_back(step_time_section(r, figs));
  if (std::any_of(figs.begin(), figs.end(), [](const StepFigures& f) { return f.layout.has_value(); }))
    d.sections.push_back(layout_section(r, figs));
  if (auto ranks = ranks_section(r)) d.sections.push_back(std::move(*ranks));
  d.sections.push_back(memory_section(r, figs));
  d.sections.push_back(class_section(r));
  const auto wi = what_if_figures(r);
  if (!wi.empty()) d.sections.push_back(what_if_section(wi, r.unit));
  return d;
}

std::optional<ReportSection> build_sweep_summary(const std::vector<RunResult>& points) {
  if (points.size() < 2) return std::nullopt;
  if (std::any_of(points.begin(), points.end(), [](const RunResult& r) { return !r.serve.empty(); }))
    return serve_sweep_summary(points);
  bool exec = false;
  for (const auto& r : points) exec = exec || is_executing(r);
  std::vector<std::string> keys;
  for (const auto& r : points)
    for (const auto& [k, v] : r.sweep_point)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);

  ReportSection s;
  s.title = "Sweep summary";
  TextTable& t = s.table;
  for (const auto& k : keys) t.add_column(k);
  t.add_column("step", Align::left);
  t.add_column("pred time");
  if (exec) t.add_column("meas time");
  const std::string unit = points.front().unit;
  t.add_column(fmt::format("pred {}/s", unit));
  if (exec) t.add_column(fmt::format("meas {}/s", unit));
  t.add_column("pred model peak");
  t.add_column("fits", Align::left);
  // Layouts over several GPUs add their per-GPU figures; a gpus axis adds the scaling
  // efficiency: tokens/s per GPU against the smallest GPU count that fits, for the same step
  // and the same values of the other axes.
  bool parallel = false;
  for (const auto& r : points)
    for (const auto& st : r.steps) parallel = parallel || st.layout.has_value();
  const bool scaling = parallel && std::find(keys.begin(), keys.end(), "gpus") != keys.end();
  if (parallel) t.add_column("tok/s/GPU"), t.add_column("MFU");
  if (scaling) t.add_column("scaling eff");
  auto others = [&](const RunResult& r) {
    std::map<std::string, std::string> v = r.sweep_point;
    v.erase("gpus");
    return v;
  };
  auto per_gpu = [](const StepFigures& f) {
    return f.layout ? f.layout->tokens_per_s_per_gpu : f.predicted_tokens_per_s;
  };
  auto gpus_of = [](const StepFigures& f) { return f.layout ? f.layout->gpus : 1; };
  // (other axes, step) -> tokens/s per GPU at the fewest GPUs that fit.
  std::map<std::pair<std::map<std::string, std::string>, std::string>, std::pair<int, double>> base;
  if (scaling)
    for (const auto& r : points)
      for (const auto& f : step_figures(r)) {
        if (!f.fits) continue;
        auto& b = base[{others(r), f.step}];
        if (b.first == 0 || gpus_of(f) < b.first) b = {gpus_of(f), per_gpu(f)};
      }
  for (const auto& r : points) {
    for (const auto& f : step_figures(r)) {
      std::vector<std::string> row;
      for (const auto& k : keys) {
        auto it = r.sweep_point.find(k);
        row.push_back(it == r.sweep_point.end() ? "" : it->second);
      }
      row.push_back(f.step);
      row.push_back(format_duration(f.predicted_time));
      if (exec) row.push_back(opt_duration(f.measured_time));
      row.push_back(format_rate(f.predicted_tokens_per_s));
      if (exec) row.push_back(opt_rate(f.measured_tokens_per_s));
      row.push_back(format_bytes(f.predicted_peak_model));
      row.push_back(f.fits ? "yes" : "does not fit");
      if (parallel) {
        row.push_back(format_rate(per_gpu(f)));
        row.push_back(fmt::format("{:.1f}%", f.predicted_mfu * 100));
      }
      if (scaling) {
        const auto it = base.find({others(r), f.step});
        row.push_back(it == base.end() || !f.fits || it->second.second <= 0
                          ? std::string(dash)
                          : fmt::format("{:.1f}%", 100 * per_gpu(f) / it->second.second));
      }
      t.add_row(std::move(row));
    }
  }
  if (scaling)
    s.notes.push_back("scaling eff: tokens/s per GPU against the fewest GPUs that fit, same step and other axes");
  return s;
}

}  // namespace perfsim
