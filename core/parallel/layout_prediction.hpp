// Pricing a parallel layout: each distinct rank's graph through the cost model, and, with
// pipeline stages, the pipeline schedule simulated over the stages' micro-batch passes. The step
// time, the bubble, the communication each collective kind adds, memory per rank and the
// throughput of the whole layout come out of those two schedules (the stream timeline within a
// rank, the pipeline schedule across ranks), not out of closed forms.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/parallel/pipeline_schedule.hpp"
#include "core/parallel/plan.hpp"

namespace perfsim {

// One distinct rank: its own prediction (ops, its timeline, memory with one micro-batch in
// flight) and what the pipeline adds.
struct RankPrediction {
  int stage = 0;
  int64_t layers = 0;                // transformer layers of its stage (stage_layers)
  Prediction prediction;
  double forward = 0, backward = 0;  // seconds of one micro-batch's forward, backward (stream 0)
  double finish = 0;                 // when its last pipeline pass ends (0 without a pipeline)
  double after_pipeline = 0;         // its step less its passes: optimizer, exposed gradient
                                     // communication, host overhead
  // Micro-batches whose activations it holds at once: an interleaved stage holds chunks of
  // several, v chunks making one (2.5: five chunks' of a stage of two).
  double in_flight = 1;
  double saved_per_micro_batch = 0;  // bytes of one micro-batch's forward activations backward reads
  double memory_peak = 0;            // bytes: its prediction's peak with `in_flight` micro-batches
  // The same for the graph as built (sampled layers), as the backend allocates it when it runs
  // the micro-batches (micro_batches.hpp).
  double saved_executed_per_micro_batch = 0;
  double memory_executed_peak = 0;
  bool fits = true;
};

// Per collective kind, over the worst rank: seconds of communication (Σ time × count) and how
// much the step would shrink were that kind free (its exposed part).
struct CommunicationFigures {
  double total = 0;
  double exposed = 0;
};

// A layout of the same GPU count that fits the hardware, as a search found it (search.hpp):
// its micro-batch and micro-batches per step keep the step's global batch.
struct FittingLayout {
  ParallelSpec layout;
  int64_t micro_batch = 1;
  int64_t grad_accum = 1;
  double tokens_per_second_per_gpu = 0;
};

struct LayoutPrediction {
  ParallelSpec layout;
  int gpus = 1;
  int micro_batches = 1;
  std::vector<RankPrediction> ranks;  // one per pipeline stage
  double step_time = 0;               // seconds
  // Of the step, on the busiest stage: training, the simulated schedule's (pipeline_schedule.hpp);
  // inference, the share of the step that stage waits while the batch is on the others.
  double bubble_fraction = 0;
  double transfer_time = 0;           // seconds of one send/recv between neighbouring stages
  double tokens_per_step = 0;         // every replica's tokens
  double tokens_per_second = 0;
  double tokens_per_second_per_gpu = 0;
  double mfu = 0, hfu = 0;            // over every GPU of the layout
  std::map<Collective, CommunicationFigures> communication;
  double communication_time = 0, exposed_communication = 0;  // the slowest rank's
  int worst_rank = 0;                 // the stage with the highest memory peak
  double memory_peak = 0;             // bytes on the worst rank
  double memory_min = 0;              // bytes on the least loaded rank
  bool fits = true;                   // every rank fits the hardware's memory
  // "stage 2 needs 91.3 GiB of 80.0 GiB" when a rank does not fit; "" otherwise.
  std::string does_not_fit;
  // When it does not fit and a search ran (fit_searched; run_scenario does it): up to three
  // layouts of the same GPUs, workload and stack step that fit, best predicted tokens/s first.
  // Searched and empty: no layout of these GPUs fits.
  bool fit_searched = false;
  std::vector<FittingLayout> layouts_that_fit;
};

// The step as one Prediction, for reports written for one graph: rank 0's ops and timeline
// figures, with the layout's step time, utilisation and communication, and the worst rank's
// memory (its peak with the micro-batches in flight) and fit.
[[nodiscard]] Prediction step_prediction(const LayoutPrediction& lp);

// Prices `ranks` (build_rank_graphs of `layout`) on `hw`.
[[nodiscard]] LayoutPrediction predict_layout(const std::vector<RankGraph>& ranks,
                                              const ParallelSpec& layout, const Hardware& hw);

}  // namespace perfsim
