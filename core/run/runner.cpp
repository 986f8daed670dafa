// run_scenario: for each stack step build the graph, predict it for the executing device and
// every other hardware of the scenario, and execute it on the backend when one is given.
#include "core/run/runner.hpp"
#include "core/run/serve_runner.hpp"

#include <fmt/format.h>

#include "core/cost/memory_model.hpp"
#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "core/run/rank_execution.hpp"
#include "core/run/step_pricing.hpp"

namespace perfsim {

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// `g` is the first step's graph (a pipeline's: stage 0's, whose layers are its own).
std::string sampling_text(const Graph& g, bool executing, int pipeline_stages) {
  const char* verb = executing ? "executed" : "built";
  if (g.workload.images)  // an image model (core/builders/cnn.cpp)
    return fmt::format("{} {} distinct blocks of {}: each stage's first, and one standing for the rest "
                       "(its times and memory counted for each)",
                       verb, g.layers_built, g.layers_total);
  if (g.layers_built <= 0 || g.layers_built >= g.layers_total)
    return fmt::format("all layers {}", verb);
  const std::string of_what = pipeline_stages > 1
                                  ? fmt::format("transformer layers of stage 0 ({} stages)", pipeline_stages)
                                  : std::string("transformer layers");
  return fmt::format("{} {} of {} {}; per-layer times and memory scaled by {:g}", verb, g.layers_built,
                     g.layers_total, of_what, g.layer_scale());
}

// Executed ops timed at zero: per-op times that do not hold together. On a GPU a replay's
// timing-probe correction once exceeded three decode ops' own brackets while the whole step
// ran 14% slow (docs/CUDA.md).
int zero_timed_ops(const Measurement& m) {
  int n = 0;
  for (const OpMeasurement& om : m.ops) n += om.executed && !(om.median > 0) ? 1 : 0;
  return n;
}

// Executes one step's graph `g`, or says why it was not executed.
void execute_step(StepResult& r, const Graph& g, Backend& backend, const DeviceInfo& device, const RunOptions& o) {
  const std::string reason = graph_unsupported_reason(backend, g);
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
    r.measured = backend.run(g, o);
    // Such a step is measured once more, and the run with fewer zero-timed ops kept.
    if (const int zeros = zero_timed_ops(*r.measured); zeros > 0) {
      Measurement again = backend.run(g, o);
      if (zero_timed_ops(again) < zeros) r.measured = std::move(again);
      r.measured->attempts = 2;
    }
  } catch (const NotExecutable& e) {
    // Only this step goes unmeasured; the others still run.
    r.not_executed = e.what();
  }
}

// What executing a step needs, the same for every step of a run.
struct Execution {
  Backend* backend = nullptr;  // nullptr: predict only
  bool enabled = false;        // a backend, and execute.enabled
  DeviceInfo device;
  RunOptions options;
  Communicator* ranks = nullptr;  // this process is one rank of several (RunnerHooks::ranks)
  double rank_timeout_s = 0;
};

// Step `i`'s graphs for its layout on `primary`. A pass that refuses names the step: earlier
// steps built already, so it is one of this step's.
StepGraphs step_graphs(const Scenario& s, const std::vector<StackStep>& stack, std::size_t i, const Hardware& primary) {
  ParallelSpec layout = step_parallel(s.parallel, stack, i);
  layout.node_gpus = primary.gpus_per_node;
  try {
    return StepGraphs(s, stack, i, layout);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}step '{}': {}", stack[i].where, stack[i].name, e.what()));
  }
}

// Executes the step (a layout: this rank's graph, on the ranks), or says in r.not_executed why
// it is not executed.
void execute(StepResult& r, const StepGraphs& graphs, const Execution& x) {
  const ParallelSpec& layout = graphs.layout();
  if (!x.enabled)
    r.not_executed =
        x.backend == nullptr ? "predicted only (no backend)" : "execution disabled (execute.enabled = false)";
  else if (layout.parallel() && x.ranks != nullptr)
    execute_on_ranks(r, graphs.ranks(), layout, *x.backend, *x.ranks, x.device, x.options, x.rank_timeout_s);
  else if (layout.parallel())
    r.not_executed = layout.gpus() == 1
                         ? fmt::format("predicted only: a one-GPU layout ({}) is not executed", describe(layout))
                         : fmt::format(
                               "predicted only: a layout of {} GPUs ({}) executes on as many ranks "
                               "(mpirun -np {}, or perfsim run --gpus {})",
                               layout.gpus(), describe(layout), layout.gpus(), layout.gpus());
  else if (x.ranks != nullptr && x.ranks->rank() != 0)
    r.not_executed = "a single-GPU step runs on rank 0";
  else
    execute_step(r, graphs.graph(), *x.backend, x.device, x.options);
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

RunResult run_scenario(const Scenario& s, Backend* backend, const Hardware* device_hw, const RunnerHooks& hooks) {
  validate(s);
  if (s.serve) return run_serving(s, backend, device_hw, hooks);
  Execution x;
  x.backend = backend;
  x.enabled = backend != nullptr && s.execute.enabled;
  x.device = backend != nullptr ? backend->device() : DeviceInfo{};
  x.options.warmup = s.execute.warmup;
  x.options.repeats = s.execute.repeats;
  x.options.min_time = s.execute.min_time;
  x.ranks = hooks.ranks;
  x.rank_timeout_s = hooks.rank_timeout_s;
  // The measured run is compared with a prediction for the device that ran it.
  const Hardware& primary = x.enabled && device_hw != nullptr ? *device_hw : s.hardware.front();

  const std::vector<StackStep> baseline = {StackStep{"baseline", {}, ""}};
  const std::vector<StackStep>& stack = s.stacks.empty() ? baseline : s.stacks;

  RunResult out = run_header(s, backend);
  out.workload = describe(s.workload);
  out.unit = s.workload.unit_name();
  out.device = backend != nullptr ? x.device.name : primary.name;
  out.steps.reserve(stack.size());
  for (std::size_t i = 0; i < stack.size(); ++i) {
    check_deadline();
    if (hooks.progress) hooks.progress(i, stack.size(), stack[i].name);
    x.options.label = fmt::format("{} / {}", s.name, stack[i].name);
    StepResult r;
    r.step = stack[i].name;
    StepGraphs graphs = step_graphs(s, stack, i, primary);
    predict_step(r, graphs, primary, hooks.find_layouts_that_fit);
    execute(r, graphs, x);
    r.graph = graphs.take_graph();
    if (i == 0) out.sampling = sampling_text(r.graph, x.enabled, graphs.layout().pp);
    out.steps.push_back(std::move(r));
  }
  return out;
}

}  // namespace perfsim
