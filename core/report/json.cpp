// The report as JSON: everything the text report shows plus per-op predictions and
// measurements. One object per sweep point under "results"; times in seconds, memory in bytes,
// missing values null.
#include <nlohmann/json.hpp>

#include "core/graph/op_shape.hpp"
#include "core/report/report.hpp"
#include "core/report/serve_json.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json class_times(const std::map<OpClass, double>& m) {
  json j = json::object();
  for (const auto& [c, t] : m) j[std::string(name_of(c))] = t;
  return j;
}

json role_bytes(const std::map<TensorRole, double>& m) {
  json j = json::object();
  // Workspace only when there is some (GPU profiles); the tensor roles always.
  for (const auto& [role, b] : m)
    if (role != TensorRole::workspace || b > 0) j[name_of(role)] = b;
  return j;
}

json op_rows(const StepResult& s) {
  json ops = json::array();
  const Graph& g = s.graph;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    json o;
    o["name"] = op.name;
    o["kind"] = std::string(name_of(op.kind));
    o["class"] = std::string(name_of(class_of(op.kind)));
    o["dtype"] = std::string(name_of(op.dtype));
    o["shape"] = op_shape_text(op, g);
    o["stage"] = name_of(op.stage);
    o["layer"] = op.layer;
    o["count"] = op.count;
    if (op.recomputed) o["recomputed"] = true;
    if (i < s.predicted.ops.size()) {
      const OpCost& c = s.predicted.ops[i];
      o["flops"] = c.flops;
      o["bytes"] = c.bytes;
      o["intensity"] = c.intensity;
      o["bound"] = c.compute_bound ? "compute" : "memory";
      o["predicted_s"] = c.time;
      o["compute_s"] = c.compute_time;
      o["memory_s"] = c.memory_time;
      o["launch_s"] = c.launch_time;
      // Eager steps on a profile that models host dispatch (COST_MODEL.md §2).
      if (c.dispatch_time > 0) {
        o["dispatch_s"] = c.dispatch_time;
        o["host_wait_s"] = c.host_wait;
      }
      if (c.calibrated) o["calibrated"] = true;
      if (!c.supported) o["supported"] = false;
    }
    if (s.measured && i < s.measured->ops.size() && s.measured->ops[i].executed) {
      o["measured_median_s"] = s.measured->ops[i].median;
      o["measured_min_s"] = s.measured->ops[i].min;
      if (s.measured->ops[i].host > 0) o["measured_host_s"] = s.measured->ops[i].host;
      if (s.measured->ops[i].device > 0) o["measured_device_s"] = s.measured->ops[i].device;
    } else if (s.measured) {
      o["measured_median_s"] = nullptr;
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

// A parallel layout: the step's figures over every GPU, and each distinct rank (pipeline stage).
json layout_object(const LayoutPrediction& lp, const LayoutFigures& f) {
  json j;
  j["layout"] = f.layout;
  j["dp"] = lp.layout.dp;
  j["tp"] = lp.layout.tp;
  j["pp"] = lp.layout.pp;
  j["cp"] = lp.layout.cp;
  j["ep"] = lp.layout.ep;
  j["sp"] = lp.layout.sp;
  j["zero"] = lp.layout.sharding_stage();
  j["schedule"] = name_of(lp.layout.pipeline_schedule());
  j["interleave"] = lp.layout.interleave;
  j["gpus"] = f.gpus;
  j["micro_batches"] = f.micro_batches;
  j["tokens_per_s"] = lp.tokens_per_second;
  j["tokens_per_s_per_gpu"] = f.tokens_per_s_per_gpu;
  j["mfu"] = f.mfu;
  j["hfu"] = f.hfu;
  j["bubble_fraction"] = f.bubble_fraction;
  j["communication_s"] = f.communication;
  j["exposed_communication_s"] = f.exposed_communication;
  json kinds = json::object();
  for (const auto& [kind, c] : lp.communication)
    kinds[std::string(name_of(kind))] = {{"total_s", c.total}, {"exposed_s", c.exposed}};
  j["communication_by_kind"] = std::move(kinds);
  j["worst_rank"] = f.worst_rank;
  j["memory_worst_bytes"] = f.memory_worst;
  j["memory_least_bytes"] = f.memory_least;
  j["fits"] = lp.fits;
  j["does_not_fit"] = f.does_not_fit;
  // Searched when it does not fit: the layouts of the same GPUs that do, best first ([] when
  // none does); null when nothing was searched.
  if (f.fit_searched) {
    json fits = json::array();
    for (const FittingLayout& fl : f.layouts_that_fit)
      fits.push_back({{"layout", describe(fl.layout)},
                      {"micro_batch", fl.micro_batch},
                      {"grad_accum", fl.grad_accum},
                      {"tokens_per_s_per_gpu", fl.tokens_per_second_per_gpu}});
    j["layouts_that_fit"] = std::move(fits);
  } else {
    j["layouts_that_fit"] = nullptr;
  }
  j["stages"] = f.stages;  // "" unless the stages hold unequal layer counts
  json ranks = json::array();
  for (const RankPrediction& r : lp.ranks) {
    json rj;
    rj["stage"] = r.stage;
    rj["layers"] = r.layers;
    rj["own_step_time_s"] = r.prediction.step_time;
    rj["forward_s"] = r.forward;
    rj["backward_s"] = r.backward;
    rj["pipeline_finish_s"] = r.finish;
    rj["after_pipeline_s"] = r.after_pipeline;
    rj["in_flight_micro_batches"] = r.in_flight;
    rj["memory_peak_bytes"] = r.memory_peak;
    rj["memory_executed_peak_bytes"] = r.memory_executed_peak;
    rj["bytes_by_role_at_peak"] = role_bytes(r.prediction.memory.by_role);
    rj["communication_s"] = r.prediction.communication_time;
    rj["exposed_communication_s"] = r.prediction.exposed_communication;
    rj["fits"] = r.fits;
    ranks.push_back(std::move(rj));
  }
  j["ranks"] = std::move(ranks);
  return j;
}

json step_object(const StepResult& s, const StepFigures& f) {
  json j;
  j["step"] = s.step;
  j["applied"] = s.graph.applied;
  j["tokens_per_step"] = f.tokens_per_step;
  // A speculative decode step: its drafts, their acceptance and a verify pass's expected yield.
  if (const Workload& w = s.graph.workload; w.phase == Phase::decode && w.draft_tokens > 0)
    j["speculative"] = {{"drafts", w.draft_tokens},
                        {"acceptance", w.acceptance},
                        {"expected_tokens_per_verify", speculative_tokens_per_step(w.acceptance, w.draft_tokens)}};
  j["layers_total"] = s.graph.layers_total;
  j["layers_built"] = s.graph.layers_built;
  j["graphed"] = s.graph.graphed;

  const Prediction& p = s.predicted;
  json pj;
  pj["hardware"] = p.hardware;
  pj["calibrated"] = p.calibrated;
  pj["profile"] = p.profile;
  // The roofline the ops were priced under (perfsim plot draws it): dense peaks of the dtypes
  // the hardware has, memory bandwidth and capacity.
  json peaks = json::object();
  for (int d = 0; d < dtype_count; ++d)
    if (p.peak_flops[static_cast<std::size_t>(d)] > 0)
      peaks[std::string(name_of(static_cast<DType>(d)))] = p.peak_flops[static_cast<std::size_t>(d)];
  pj["peak_flops_s"] = std::move(peaks);
  pj["memory_bandwidth_bytes_s"] = p.memory_bandwidth;
  pj["memory_capacity_bytes"] = p.memory_capacity;
  pj["step_time_s"] = p.step_time;
  pj["host_time_s"] = p.host_time;
  pj["tokens_per_s"] = f.predicted_tokens_per_s;
  pj["speedup"] = f.predicted_speedup;
  pj["flops"] = p.flops;
  pj["model_flops"] = p.model_flops;
  pj["model_flops_s_per_gpu"] = f.predicted_model_flops_per_gpu;
  pj["mfu_peak_flops_s"] = p.mfu_peak;
  pj["mfu"] = p.mfu;
  pj["hfu"] = p.hfu;
  if (s.layout && f.layout) pj["parallel"] = layout_object(*s.layout, *f.layout);
  pj["peak_bytes_executed"] = p.memory_executed.peak;
  pj["peak_bytes_model"] = p.memory.peak;
  pj["peak_at"] = p.memory.peak_at;
  pj["bytes_by_role_at_peak"] = role_bytes(p.memory.by_role);
  if (f.predicted_workspace > 0) pj["workspace_bytes_executed"] = f.predicted_workspace;
  if (p.memory.host_bytes > 0) {  // only graphs holding data in host memory
    pj["host_bytes"] = p.memory.host_bytes;
    pj["host_pinned_bytes"] = p.memory.host_pinned_bytes;
  }
  pj["fits"] = p.fits;
  // A single-GPU step that does not fit: the fewest GPUs a layout of which fits (null: none up to
  // 1,024) and those layouts; absent when nothing was searched.
  if (s.fit_searched) {
    json layouts = json::array();
    for (const FittingLayout& fl : s.layouts_that_fit)
      layouts.push_back({{"layout", describe(fl.layout)},
                         {"micro_batch", fl.micro_batch},
                         {"grad_accum", fl.grad_accum},
                         {"tokens_per_s_per_gpu", fl.tokens_per_second_per_gpu}});
    pj["fits_on"] = {{"gpus", s.fit_gpus > 0 ? json(s.fit_gpus) : json(nullptr)}, {"layouts", std::move(layouts)}};
  }
  pj["unsupported"] = p.unsupported;
  pj["time_by_class_s"] = class_times(p.time_by_class);
  j["predicted"] = std::move(pj);

  if (s.measured) {
    const Measurement& m = *s.measured;
    json mj;
    mj["backend"] = m.backend;
    mj["device"] = m.device;
    mj["step_time_s"] = m.step_time;
    mj["executed_wall_s"] = m.executed_wall;
    mj["tokens_per_s"] = opt(f.measured_tokens_per_s);
    mj["speedup"] = opt(f.measured_speedup);
    mj["model_flops_s_per_gpu"] = opt(f.measured_model_flops_per_gpu);
    mj["mfu"] = opt(f.measured_mfu);
    mj["peak_bytes"] = m.peak_bytes;
    mj["bytes_by_role_at_peak"] = role_bytes(m.bytes_by_role_at_peak);
    mj["time_by_class_s"] = class_times(m.time_by_class);
    mj["warmup"] = m.warmup;
    mj["repeats"] = m.repeats;
    mj["spread"] = opt(repeat_spread(s));
    if (!s.rank_measured.empty()) {
      // Executed on several ranks: step_time_s above is the slowest rank's.
      json ranks = json::array();
      for (const RankMeasurement& rm : s.rank_measured) {
        json kinds = json::object();
        for (const auto& [c, seconds] : rm.exposed_by_kind) kinds[name_of(c)] = seconds;
        ranks.push_back({{"rank", rm.rank},
                         {"stage", rm.stage},
                         {"host", rm.host},
                         {"step_time_s", rm.step_time},
                         {"executed_wall_s", rm.executed_wall},
                         {"peak_bytes", rm.peak_bytes},
                         {"exposed_communication_s", rm.exposed_communication},
                         {"exposed_by_kind_s", std::move(kinds)}});
      }
      mj["ranks"] = std::move(ranks);
    }
    j["measured"] = std::move(mj);
  } else {
    j["measured"] = nullptr;
  }
  j["time_error"] = opt(f.time_error);
  j["memory_error"] = opt(f.memory_error);
  j["not_executed"] = s.not_executed;
  j["note"] = f.note;
  j["ops"] = op_rows(s);
  return j;
}

json what_if_array(const RunResult& r) {
  json arr = json::array();
  for (const auto& w : what_if_figures(r)) {
    json j;
    j["hardware"] = w.hardware;
    j["step"] = w.step;
    j["step_time_s"] = w.step_time;
    j["tokens_per_s"] = w.tokens_per_s;
    j["speedup"] = w.speedup;
    j["mfu"] = w.mfu;
    if (w.layout) {
      j["gpus"] = w.layout->gpus;
      j["tokens_per_s_per_gpu"] = w.layout->tokens_per_s_per_gpu;
      j["bubble_fraction"] = w.layout->bubble_fraction;
      j["exposed_communication_s"] = w.layout->exposed_communication;
      j["memory_worst_bytes"] = w.layout->memory_worst;
    }
    j["peak_bytes_model"] = w.peak_model;
    j["fits"] = w.fits;
    j["unsupported"] = w.unsupported;
    j["note"] = w.note;
    arr.push_back(std::move(j));
  }
  return arr;
}

}  // namespace

std::string format_json(const std::vector<RunResult>& points) {
  json results = json::array();
  for (const RunResult& r : points) {
    json j;
    j["scenario"] = r.scenario;
    j["description"] = r.description;
    j["file"] = r.file;
    j["sweep"] = json::object();
    for (const auto& [k, v] : r.sweep_point) j["sweep"][k] = v;
    j["model"] = r.model;
    j["model_params"] = r.model_params;
    j["model_active_params"] = r.model_active_params;
    j["workload"] = r.workload;
    // What the steps' tokens_per_step and tokens_per_s count: tokens, or an image model's images.
    j["throughput_unit"] = r.unit == "img" ? "images" : "tokens";
    j["backend"] = r.backend;
    j["unsafe"] = r.unsafe;
    j["device"] = r.device;
    j["sampling"] = r.sampling;
    const auto figs = step_figures(r);
    json steps = json::array();
    for (std::size_t i = 0; i < r.steps.size(); ++i) steps.push_back(step_object(r.steps[i], figs[i]));
    j["steps"] = std::move(steps);
    j["what_if"] = what_if_array(r);
    // A serving scenario: its engine runs (its `steps` is then empty).
    if (!r.serve.empty()) j["serve"] = serve_json(r);
    results.push_back(std::move(j));
  }
  json doc;
  doc["results"] = std::move(results);
  // Replace invalid UTF-8 (a device name read from the OS) instead of failing the report.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace perfsim
