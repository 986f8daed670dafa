// run_scenario: for each stack step build the graph, predict it for the executing device and
// every other hardware of the scenario, and execute it on the backend when one is given.
#include "core/run/runner.hpp"
#include "core/run/serve_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "core/cost/memory_model.hpp"
#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "core/parallel/plan.hpp"
#include "core/parallel/search.hpp"
#include "core/run/rank_execution.hpp"

namespace perfsim {

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// `g` is the first step's graph (a pipeline's: stage 0's, whose layers are its own).
std::string sampling_text(const Graph& g, bool executing, int pipeline_stages) {
  const char* verb = executing ? "executed" : "built";
  if (g.layers_built <= 0 || g.layers_built >= g.layers_total)
    return fmt::format("all layers {}", verb);
  const std::string of_what = pipeline_stages > 1
                                  ? fmt::format("transformer layers of stage 0 ({} stages)", pipeline_stages)
                                  : std::string("transformer layers");
  return fmt::format("{} {} of {} {}; per-layer times and memory scaled by {:g}", verb, g.layers_built,
                     g.layers_total, of_what, g.layer_scale());
}

// Executes one step's graph, or says why it was not executed.
// Executed ops timed at zero: per-op times that do not hold together. On a GPU a replay's
// timing-probe correction once exceeded three decode ops' own brackets while the whole step
// ran 14% slow (docs/CUDA.md).
int zero_timed_ops(const Measurement& m) {
  int n = 0;
  for (const OpMeasurement& om : m.ops) n += om.executed && !(om.median > 0) ? 1 : 0;
  return n;
}

void execute_step(StepResult& r, Backend& backend, const DeviceInfo& device, const RunOptions& o) {
  const std::string reason = graph_unsupported_reason(backend, r.graph);
  if (!reason.empty()) {
    r.not_executed = reason;
    return;
  }
  // The graph as built (unscaled) is what the backend allocates.
  const double needs = r.predicted.memory_executed.peak;
  if (device.memory_bytes > 0 && needs > device.memory_bytes) {
    r.not_executed = fmt::format(
        "does not fit: needs {:.2f} GiB, device has {:.2f} GiB; execute fewer layers "
        "(execute.layers) or a smaller batch",
        needs / gib, device.memory_bytes / gib);
    return;
  }
  try {
    r.measured = backend.run(r.graph, o);
    // Such a step is measured once more, and the run with fewer zero-timed ops kept.
    if (const int zeros = zero_timed_ops(*r.measured); zeros > 0) {
      Measurement again = backend.run(r.graph, o);
      if (zero_timed_ops(again) < zeros) r.measured = std::move(again);
      r.measured->attempts = 2;
    }
  } catch (const NotExecutable& e) {
    // Only this step goes unmeasured; the others still run.
    r.not_executed = e.what();
  }
}

// Layouts the step's layout names beside "does not fit": at most this many, each a different
// layout (its best micro-batch).
constexpr std::size_t fitting_layouts_shown = 3;

// When step `i`'s layout does not fit `hw`: the layouts of the same GPU count that fit, found by
// the layout search over that step alone (its passes, the search's default space, recompute as
// the stack has it; cp as the step has it), best predicted tokens/s first.
// The fitting layouts of `space`'s GPU count (at most fitting_layouts_shown, distinct), best
// first; nullopt when the space has no usable layout (no micro-batch divides the global batch).
std::optional<std::vector<FittingLayout>> fitting_layouts(const Scenario& s, const std::vector<StackStep>& stack,
                                                          std::size_t i, const ParallelSpec& base,
                                                          const Hardware& hw, SearchSpace space) {
  // As many layers a stage as the step's own graphs (execute.layers, 2 by default), so a layout
  // named here prices as it would in a row of its own; at most 2 (0, all, is 1 here), to keep
  // the search cheap. A few threads: the search is small.
  space.layers = std::clamp<int64_t>(s.execute.layers, 1, 2);
  space.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1U, 4U));
  SearchResult found;
  try {
    found = search_layouts(s.model, s.workload, stack, i, base, hw, space);
  } catch (const ConfigError&) {
    return std::nullopt;
  }
  std::vector<FittingLayout> out;
  for (const SearchCandidate& c : found.layouts) {
    if (!c.fits || out.size() >= fitting_layouts_shown) break;
    const std::string name = describe(c.layout);
    if (std::any_of(out.begin(), out.end(), [&](const FittingLayout& f) { return describe(f.layout) == name; }))
      continue;
    out.push_back({c.layout, c.micro_batch, c.grad_accum, c.tokens_per_second_per_gpu});
  }
  return out;
}

// When step `i`'s layout does not fit `hw`: the layouts of the same GPU count that fit, found by
// the layout search over that step alone (its passes, the search's default space, recompute as
// the stack has it; cp as the step has it), best predicted tokens/s first.
void find_layouts_that_fit(LayoutPrediction& lp, const Scenario& s, const std::vector<StackStep>& stack,
                           std::size_t i, const Hardware& hw) {
  SearchSpace space;
  space.gpus = lp.layout.gpus();
  if (lp.layout.cp > 1) space.cp = {1, lp.layout.cp};
  if (auto found = fitting_layouts(s, stack, i, lp.layout, hw, space)) {
    lp.fit_searched = true;
    lp.layouts_that_fit = std::move(*found);
  }
}

// When single-GPU step `i` does not fit `hw`: the fewest GPUs, doubling from 2 up to 1,024,
// some layout of which fits. Each GPU keeps the step's micro-batch (training: the global batch
// grows with the GPUs, as adding data-parallel replicas does); inference splits the step's
// batch. The layouts searched are the search's defaults at that micro-batch, one chunk a stage.
void find_gpus_that_fit(StepResult& r, const Scenario& s, const std::vector<StackStep>& stack, std::size_t i,
                        const Hardware& hw) {
  constexpr int most_gpus = 1024;
  const Workload& w = s.workload;
  r.fit_searched = true;
  for (int gpus = 2; gpus <= most_gpus; gpus *= 2) {
    SearchSpace space;
    space.gpus = gpus;
    space.interleave = {1};
    if (w.phase == Phase::train) {
      space.micro_batches = {r.graph.workload.batch};
      space.global_batch = r.graph.workload.batch * r.graph.workload.grad_accum * gpus;
    }
    const std::optional<std::vector<FittingLayout>> found = fitting_layouts(s, stack, i, ParallelSpec{}, hw, space);
    if (found && !found->empty()) {
      r.fit_gpus = gpus;
      r.layouts_that_fit = *found;
      return;
    }
  }
}

}  // namespace

RunResult run_header(const Scenario& s, const Backend* backend) {
  RunResult out;
  out.scenario = s.name;
  out.file = s.file;
  out.description = s.description;
  out.model = s.model.name;
  out.model_params = s.model.params();
  out.model_active_params = s.model.active_params();
  out.backend = backend != nullptr ? backend->name() : "none";
  return out;
}

RunResult run_scenario(const Scenario& s, Backend* backend, const Hardware* device_hw,
                       const RunnerHooks& hooks) {
  validate(s);
  if (s.serve) return run_serving(s, backend, device_hw, hooks);
  const bool executing = backend != nullptr && s.execute.enabled;
  const DeviceInfo device = backend != nullptr ? backend->device() : DeviceInfo{};
  // The measured run is compared with a prediction for the device that ran it.
  const Hardware& primary = executing && device_hw != nullptr ? *device_hw : s.hardware.front();

  const std::vector<StackStep> baseline = {StackStep{"baseline", {}, ""}};
  const std::vector<StackStep>& stack = s.stacks.empty() ? baseline : s.stacks;

  RunResult out = run_header(s, backend);
  out.workload = describe(s.workload);
  out.device = backend != nullptr ? device.name : primary.name;
  out.steps.reserve(stack.size());

  RunOptions run_options;
  run_options.warmup = s.execute.warmup;
  run_options.repeats = s.execute.repeats;
  run_options.min_time = s.execute.min_time;
  for (std::size_t i = 0; i < stack.size(); ++i) {
    check_deadline();
    if (hooks.progress) hooks.progress(i, stack.size(), stack[i].name);
    run_options.label = fmt::format("{} / {}", s.name, stack[i].name);
    StepResult r;
    r.step = stack[i].name;
    ParallelSpec layout = step_parallel(s.parallel, stack, i);
    layout.node_gpus = primary.gpus_per_node;
    std::vector<RankGraph> ranks;
    try {
      if (layout.parallel())
        ranks = build_rank_graphs(s.model, s.workload, stack, i, layout, s.execute.layers);
      else
        r.graph = build_stack_graph(s.model, s.workload, stack, i, BuildOptions::sampled(s.execute.layers));
    } catch (const ConfigError& e) {
      // Earlier steps built already, so the pass that refused is one of this step's.
      throw ConfigError(fmt::format("{}step '{}': {}", stack[i].where, stack[i].name, e.what()));
    }
    if (layout.parallel()) {
      r.layout = predict_layout(ranks, layout, primary);
      if (!r.layout->fits && hooks.find_layouts_that_fit && layout.gpus() > 1)
        find_layouts_that_fit(*r.layout, s, stack, i, primary);
      r.predicted = step_prediction(*r.layout);
      for (const Hardware& hw : s.hardware)
        if (hw.name != primary.name) {
          if (hw.gpus_per_node == layout.node_gpus) {
            r.what_if_layout.push_back(predict_layout(ranks, layout, hw));
          } else {
            // Nodes of another size shard hybrid_shard differently: that hardware's own ranks.
            ParallelSpec other = layout;
            other.node_gpus = hw.gpus_per_node;
            r.what_if_layout.push_back(predict_layout(
                build_rank_graphs(s.model, s.workload, stack, i, other, s.execute.layers), other, hw));
          }
          r.what_if.push_back(step_prediction(r.what_if_layout.back()));
        }
      if (executing && hooks.ranks != nullptr)
        execute_on_ranks(r, ranks, layout, *backend, *hooks.ranks, device, run_options, hooks.rank_timeout_s);
      r.graph = std::move(ranks.front().graph);
      // One GPU with ZeRO on: what fits is a question of more GPUs, as without a layout.
      if (!r.layout->fits && hooks.find_layouts_that_fit && layout.gpus() == 1)
        find_gpus_that_fit(r, s, stack, i, primary);
    } else {
      r.predicted = predict(r.graph, primary);
      if (!r.predicted.fits && hooks.find_layouts_that_fit) find_gpus_that_fit(r, s, stack, i, primary);
      for (const Hardware& hw : s.hardware)
        if (hw.name != primary.name) r.what_if.push_back(predict(r.graph, hw));
    }

    if (executing && layout.parallel() && hooks.ranks == nullptr)
      r.not_executed = layout.gpus() == 1
                           ? fmt::format("predicted only: a one-GPU layout ({}) is not executed", describe(layout))
                           : fmt::format("predicted only: a layout of {} GPUs ({}) executes on as many ranks "
                                         "(mpirun -np {}, or perfsim run --gpus {})",
                                         layout.gpus(), describe(layout), layout.gpus(), layout.gpus());
    else if (executing && layout.parallel())
      ;  // executed on the ranks above
    else if (executing && hooks.ranks != nullptr && hooks.ranks->rank() != 0)
      r.not_executed = "a single-GPU step runs on rank 0";
    else if (executing)
      execute_step(r, *backend, device, run_options);
    else
      r.not_executed = backend == nullptr ? "predicted only (no backend)"
                                          : "execution disabled (execute.enabled = false)";
    if (i == 0) out.sampling = sampling_text(r.graph, executing, layout.pp);
    out.steps.push_back(std::move(r));
  }
  return out;
}

}  // namespace perfsim
