// Pipeline-parallel schedules: the order in which each pipeline stage runs the forward and
// backward passes of its micro-batches (GPipe, 1F1B, interleaved 1F1B), and an event simulation
// that turns per-stage pass durations into the step's timeline: makespan, each stage's busy and
// idle time (its bubble), the activations each stage holds at most, and every pass's interval.
//
// Schedules (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", §2.2):
//   gpipe        all m forwards, then all m backwards (Huang et al. 2019; §2.2.1, Figure 3);
//   one_f_one_b  PipeDream-Flush (Narayanan et al. 2021a; §2.2.1, Figure 4, top): stage s runs
//                min(p − s − 1, m) warm-up forwards, then alternates one forward and one
//                backward, then the remaining backwards (cool-down);
//   interleaved  interleaved 1F1B (§2.2.2, Figure 4, bottom): each stage holds v model chunks,
//                stage s holding virtual stages s, s + p, …, s + (v − 1)p. The order is
//                Megatron-LM's forward_backward_pipelining_with_interleaving: forwards walk the
//                chunks in groups of p micro-batches (chunk 0 for micro-batches 0..p−1, chunk 1
//                for the same, …, then the next p micro-batches), backwards the same groups with
//                the chunks reversed; stage s runs (p − s − 1)·2 + (v − 1)·p warm-up forwards
//                (capped at m·v; all m·v when m == p, as Megatron does), then 1F1B, then the
//                cool-down backwards. Needs m a multiple of p. With v == 1 it is 1F1B, as
//                Megatron runs the non-interleaved schedule for one chunk.
//
// The simulation's model: a stage runs its passes strictly in its order, one at a time; a pass
// starts when its stage is free and its input is ready. The forward of (micro-batch, virtual
// stage k) needs the forward of k − 1; the backward of k needs the backward of k + 1, and the
// last virtual stage's backward needs its own forward. A transfer between two different stages
// adds send_forward or send_backward to the receiver's ready time; it runs on a stream of its
// own, so the sender does not wait for it (and transfers never queue behind one another).
#pragma once
#include <vector>

#include "core/config/parallel.hpp"

namespace perfsim {

enum class PassKind { forward, backward };

// One pass a stage runs: the forward or backward of micro-batch `micro_batch` (0..m−1) through
// model chunk `chunk` (0..v−1) of that stage, i.e. virtual stage chunk·p + stage.
struct PipelineSlot {
  PassKind kind = PassKind::forward;
  int micro_batch = 0;
  int chunk = 0;
  friend bool operator==(const PipelineSlot&, const PipelineSlot&) = default;
};

// The order in which stage `stage` of `p` runs its passes for `m` micro-batches and `v` model
// chunks per stage: 2·m·v slots, each (micro-batch, chunk) once forward and once backward,
// forward first. Throws ConfigError on bad sizes: p, m, v below 1, stage outside 0..p−1, v > 1
// for gpipe or 1f1b, m not a multiple of p for interleaved.
[[nodiscard]] std::vector<PipelineSlot> pipeline_order(PipelineSchedule s, int p, int m, int v,
                                                       int stage);

// Per-stage pass durations the simulation prices a schedule with.
struct PipelineTimes {
  // Seconds one micro-batch's forward and backward take through each chunk of each stage:
  // [stage][chunk], p × v.
  std::vector<std::vector<double>> forward, backward;
  // Seconds a point-to-point transfer of an activation (forward) or of its gradient (backward)
  // takes between two stages; it delays the receiver only.
  double send_forward = 0, send_backward = 0;
};

// One pass on the timeline.
struct PipelineEvent {
  int stage = 0;
  PipelineSlot slot;
  double start = 0, end = 0;
};

struct PipelineRun {
  double makespan = 0;              // first pass start to last pass end over all stages
  std::vector<double> busy;         // per stage: seconds computing
  std::vector<double> idle;         // per stage: makespan − busy (its bubble)
  // The step's bubble, measured on the busiest stage (largest busy; its idle is the least):
  //   bubble_fraction = idle / makespan = 1 − max busy / makespan, the share of the step the
  //     busiest stage waits; with uniform stages, GPipe and 1F1B give (p − 1)/(m + p − 1),
  //     formulas::pipeline_bubble_fraction;
  //   bubble_ratio = idle / busy, bubble time over ideal compute time, the way §2.2.2 states the
  //     interleaved schedule's (p − 1)/(v·m), formulas::interleaved_bubble_ratio.
  // Both are 0 for a stage that never waits; with uneven stages they say how much the slowest
  // stage loses, the one that bounds the step.
  double bubble_fraction = 0;
  double bubble_ratio = 0;
  // Per stage: the most (micro-batch, chunk) pairs whose forward has run and backward not yet,
  // the activations it holds at once (in units of one chunk's activations of one micro-batch).
  std::vector<int> peak_in_flight;
  // Every pass, stage by stage, each stage's in its order; empty unless asked for.
  std::vector<PipelineEvent> events;
};

// Simulates schedule `s` over `p` stages, `m` micro-batches and `v` chunks per stage with the
// durations `t`. Events are built only when `record_events` is set (a layout search needs the
// figures only). Throws ConfigError on the sizes pipeline_order refuses, time tables that are
// not p × v, and negative or non-finite durations; std::logic_error on an order that deadlocks.
[[nodiscard]] PipelineRun simulate_pipeline(PipelineSchedule s, int p, int m, int v,
                                            const PipelineTimes& t, bool record_events = false);

// The same simulation for orders given explicitly, orders[stage] for each of the p =
// orders.size() stages (a schedule of one's own). Throws ConfigError on bad sizes and times as
// above; std::logic_error when an order is not each (micro-batch, chunk) forward then backward
// exactly once, or when the orders deadlock (a pass waits on one its producer's order puts
// after a pass that in turn waits on it).
[[nodiscard]] PipelineRun simulate_pipeline_orders(const std::vector<std::vector<PipelineSlot>>& orders,
                                                   int m, int v, const PipelineTimes& t,
                                                   bool record_events = false);

}  // namespace perfsim
