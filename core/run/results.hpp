// What `perfsim run` produces: for each stack step, the prediction for the executing device
// paired with its measurement (or the reason there is none), plus what-if predictions.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/graph/graph.hpp"
#include "core/parallel/layout_prediction.hpp"
#include "core/serve/simulate.hpp"

namespace perfsim {

// A measurement of one graph on a backend. Per-op times are medians of the timed repeats.
struct OpMeasurement {
  int op = -1;
  double median = 0;   // seconds, one op (not × count)
  double min = 0;
  bool executed = false;
  double host = 0;     // eager CUDA runs: median host seconds spent issuing the op (0 = not timed)
  // Eager CUDA runs: median seconds of the op queued behind the one before it (the stream held
  // until the step was issued), the device's time without waits for the host (0 = not timed).
  double device = 0;
  // Seconds from the step's start to the op's start and end in the timed run of median length
  // (eager runs; −1: not recorded): where it really ran, waits for other ranks included.
  double start = -1, end = -1;
};

struct Measurement {
  std::string backend;                  // "cpu", "cuda"
  std::string device;                   // e.g. "AMD EPYC 7B13 (2 threads)"
  std::vector<OpMeasurement> ops;       // one per graph op, same order
  std::map<OpClass, double> time_by_class;  // Σ median × count
  double step_time = 0;                 // stream timeline of the medians (one stream: Σ median × count)
  double executed_wall = 0;             // median wall time of one run of the graph as built
  double peak_bytes = 0;                // allocator high-water mark of the graph as built
  std::map<TensorRole, double> bytes_by_role_at_peak;
  int warmup = 0, repeats = 0;
  // CUDA graph replay (Graph::graphed): ops, time_by_class and step_time come from timed
  // replays of the captured step (op_timing says how); executed_wall from plain replays.
  bool graph_replayed = false;
  // How the device times of the ops were taken: "CUPTI records" (the device's own records of
  // their kernels, copies and memsets), "event nodes" (in a replay) or "events" (around eager
  // launches); empty where the backend has no device times.
  std::string op_timing;
  // Runs of the step this measurement was kept from: 2 when the first had executed ops timed
  // at zero and was run again (runner.cpp).
  int attempts = 1;
};

// One rank's figures of a parallel step executed on several ranks (rank_execution.hpp).
struct RankMeasurement {
  int rank = 0;
  int stage = 0;            // its pipeline stage
  std::string host;
  double step_time = 0;     // its Measurement::step_time
  double executed_wall = 0; // its median wall time of one run
  double peak_bytes = 0;    // its allocator's high-water mark
  // The part of its step the collectives add: the stream timeline of its measured op times
  // less the same timeline with every collective taking no time (rank_execution.cpp).
  double exposed_communication = 0;
  // The same per collective kind present: the timeline less the same with that kind free.
  std::map<Collective, double> exposed_by_kind;
  // Where each op of its graph as it ran (a pipeline's micro-batches unrolled) started and ended
  // in its run of median length, for the trace; empty when the backend did not record it.
  struct Span {
    std::string op;
    int stream = 0;
    double start = 0, end = 0;  // seconds from the rank's step start
  };
  std::vector<Span> timeline;
};

struct StepResult {
  std::string step;                     // stack step name
  Graph graph;
  Prediction predicted;                 // for the executing device (or first hardware)
  std::optional<Measurement> measured;
  std::string not_executed;             // why there is no measurement, when there is none
  std::vector<Prediction> what_if;      // other hardware of the scenario
  // A parallel layout: its per-rank predictions, for the executing device (or first hardware)
  // and each what-if hardware (same order as what_if). `graph` is then rank 0's graph and
  // `predicted` the step as step_prediction() sums it up.
  std::optional<LayoutPrediction> layout;
  std::vector<LayoutPrediction> what_if_layout;
  // A layout executed on several ranks: every rank's figures, in rank order (rank 0's copy of
  // the result only). `measured` is then rank 0's ops with the slowest rank's step time and wall.
  std::vector<RankMeasurement> rank_measured;
  // A single-GPU step that does not fit: the fewest GPUs (of 2, 4, 8, … 1,024) some layout of
  // which fits, and up to three such layouts, best first (fit_gpus 0: none up to 1,024). Only
  // when searched (fit_searched; run_scenario does it).
  bool fit_searched = false;
  int fit_gpus = 0;
  std::vector<FittingLayout> layouts_that_fit;
};

// One stack step of a serving scenario: the engine's run predicted for the device (or first
// hardware), the same traffic predicted on the other hardware, and the executed run.
struct ServeStepResult {
  std::string step;
  std::string hardware;                 // what `predicted` was priced on
  std::string profile;                  // "calibrated on DEVICE DATE" or "datasheet, uncalibrated"
  std::string scheduler;                // describe(SchedulerConfig)
  std::string does_not_fit;             // why this step's engine does not fit its GPU ("" = it does; then
                                        // `predicted` and the rest are empty)
  ServePrediction predicted;
  struct WhatIf {
    std::string hardware;
    ServeMetrics metrics;
    std::string error;                  // why it could not be predicted there ("" = fine)
  };
  std::vector<WhatIf> what_if;
  std::string not_executed;             // why there is no executed run
  // The executed run: the same requests through the same scheduler on the backend's wall clock.
  struct Executed {
    EngineRun run;
    ServeMetrics metrics;
    std::vector<ExecutedStep> steps;    // by run.steps: measured, and the cost model's price of the same batch
    double held_bytes = 0;              // weights and KV pages the backend held across steps
    double seconds = 0;                 // wall seconds of the whole run, setup included
    // Replicas executed on ranks (serve_ranks.hpp): each replica's requests, steps and metrics
    // (disaggregated: the prefill engine, then the decode engine).
    std::vector<ReplicaSummary> replicas;
    // Disaggregated on ranks: by request id, the measured send of its prompt's KV bytes from the
    // prefill rank to the decode rank (-1: refused before it).
    std::vector<double> kv_transfers;
    std::vector<double> kv_prefilled;  // and when its prefill ended on the prefill rank
  };
  std::optional<Executed> executed;
};

struct RunResult {
  std::string scenario, file, description;
  std::string model;
  int64_t model_params = 0;             // parameters of the whole model (report header)
  int64_t model_active_params = 0;      // those one token uses (mixture of experts: top_k experts)
  std::string workload;                 // describe(Workload) of the base workload
  std::string unit = "tok";             // what rates count: "tok", or "img" for an image model's batches
  std::string backend;                  // "none" when only predicting
  std::string device;
  std::string sampling;                 // e.g. "executed 2 of 32 layers; times scaled by 16"
  std::map<std::string, std::string> sweep_point;  // sweep key -> value for this row
  bool unsafe = false;                  // the script ran without the sandbox (--unsafe)
  std::vector<StepResult> steps;
  // A serving scenario: `steps` is empty and each stack step's engine run is here.
  std::string traffic;                  // describe(ServeSpec)
  std::vector<ServeStepResult> serve;
};

// Tokens one step processes: every data-parallel replica's for a parallel layout.
[[nodiscard]] double step_tokens(const StepResult& s);

// "batch=8, prompt=512" (keys in map order); "" without a sweep.
[[nodiscard]] std::string sweep_label(const std::map<std::string, std::string>& values);
// Relative error of a prediction: (predicted − measured) / measured.
[[nodiscard]] double relative_error(double predicted, double measured);
// Throughput speedup of `step` over `base`: (tokens/time)_step / (tokens/time)_base.
[[nodiscard]] double speedup(double base_time, double base_tokens, double time, double tokens);

}  // namespace perfsim
