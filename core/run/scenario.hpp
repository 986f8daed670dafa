// A scenario: model, hardware, workload, optimization stacks and execution options,
// as produced by the DSL from a Lua script.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/passes/passes.hpp"
#include "core/config/model.hpp"
#include "core/config/parallel.hpp"
#include "core/config/serve.hpp"
#include "core/config/workload.hpp"
#include "core/run/execute_counts.hpp"

namespace perfsim {

struct ExecuteOptions {
  bool enabled = true;   // false: predict only
  int64_t layers = 2;    // transformer layers to execute (0 = all); the rest are scaled
  int warmup = default_warmup_runs;  // untimed runs before measuring
  int repeats = default_timed_runs;  // timed runs; per-op figures are medians
  double min_time = 0;   // seconds: after `repeats`, more timed runs until they last this long
  // Serving: the executed engine runs in real time, every layer, so a run the prediction says
  // lasts longer than this (seconds, on the executing device) is predicted only.
  double serve_seconds = 600;
};

// One axis of a sweep: a scenario field and the values it takes.
struct SweepAxis {
  std::string key;            // "batch", "prompt", "new_tokens", "seq", "grad_accum", "hardware", "model"
  std::vector<std::string> values;
};

// A figure a paper or vendor page published for this scenario's configuration
// (`perfsim validate --published`, core/validate/published.hpp): what it was, where it came from.
struct PublishedFigure {
  std::string source;    // short key grouping the cases of one table: "megatron-sc21"
  std::string citation;  // "Narayanan et al. 2021 (SC21), Table 1"
  std::string url;
  std::string metric;    // a published_metrics() name: "step_time", "tokens_per_s_per_gpu", ...
  double value = 0;      // in the metric's unit
  std::string note;      // how the configuration was read off the source, where it needed reading
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;                  // script it came from
  ModelConfig model;
  std::vector<Hardware> hardware;    // first = prediction target when not executing
  Workload workload;
  // How the step is spread over GPUs (a single GPU by default); stack steps may change it with
  // parallel passes ({tp = 8}, {zero = 3}).
  ParallelSpec parallel;
  std::vector<StackStep> stacks;     // cumulative; empty = a single "baseline" step
  ExecuteOptions execute;
  std::vector<SweepAxis> sweep;
  // workload = serve{...}: serving traffic through an engine; `workload` is then the decode step
  // of one sequence at the mean lengths (what explain shows).
  std::optional<ServeSpec> serve;
  // The published measurement of this configuration, for `perfsim validate --published`.
  std::optional<PublishedFigure> published;
};

// Throws ConfigError when the model, workload, stack or hardware list is unusable.
void validate(const Scenario& s);

}  // namespace perfsim
