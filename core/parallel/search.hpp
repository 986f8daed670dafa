// Layout search: every parallel layout of a model over a GPU count (tp, pp, dp, cp, micro-batch,
// interleave, recompute, ZeRO, sp) enumerated, the invalid ones pruned with a reason, the rest
// built (build_rank_graphs) and priced (predict_layout), ranked by predicted tokens/s with the
// layouts that fit memory first. docs/CLI.md (perfsim search) states the space and the rules.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <functional>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/passes/passes.hpp"
#include "core/config/model.hpp"
#include "core/config/parallel.hpp"
#include "core/config/workload.hpp"

namespace perfsim {

// The candidates of each dimension. An empty list takes the default stated beside it.
struct SearchSpace {
  int gpus = 0;                      // GPUs every layout spans: dp · tp · pp · cp
  std::vector<int> tp;               // default: powers of two up to the node (gpus_per_node,
                                     // 8 when the hardware gives none) dividing gpus
  std::vector<int> pp;               // default: divisors of gpus up to the model's layers
  bool uneven_pp = false;            // keep layouts whose stages (or chunks) hold unequal layer
                                     // counts; pruned by default
  std::vector<int> cp;               // default 1; search_cp: powers of two up to 16 dividing
  bool search_cp = false;            // gpus with seq % (2 · cp) == 0
  std::vector<int> ep;               // default: a mixture-of-experts model's powers of two dividing
                                     // its experts (1 for a dense model); pruned unless ep | dp
  std::vector<int64_t> micro_batches;  // default: 1, 2, 4, 8 and the scenario's batch
  int64_t global_batch = 0;          // sequences per optimizer step (inference: per step);
                                     // 0: the scenario's batch · grad_accum · dp
  std::vector<int> interleave;       // default 1, 2, 4 (chunks per stage, only with pp > 1)
  bool search_recompute = false;     // try each layout with and without full recompute (the
                                     // stack's own recompute pass is dropped); off: the stack as is
  std::vector<int> zero;             // default 0-3 (only 0 with dp == 1 or for inference)
  int threads = 0;                   // worker threads; 0: the machine's cores
  int64_t layers = 1;                // transformer layers built per stage (BuildOptions::layers)
  // Told how many of the layouts to price are priced (one call at a time, from the workers),
  // for a progress line.
  std::function<void(std::size_t priced, std::size_t total)> progress;
};

// Why an enumerated layout was not priced, or not ranked among the fitting ones.
enum class PruneReason {
  batch_split,          // global batch not a multiple of micro-batch · dp
  tp_split,             // tp does not divide the heads, KV heads or MLP width
  too_many_chunks,      // pp · interleave above the layers
  uneven_stages,        // layers not a multiple of pp · interleave (without uneven_pp)
  interleave_batches,   // interleaved schedule with micro-batches not a multiple of pp
  cp_split,             // the sequence does not split into 2 · cp equal chunks
  ep_split,             // ep does not divide dp (expert-parallel ranks are data-parallel ones)
  invalid_other,        // validate(ParallelSpec) refused it for another reason
  does_not_fit,         // priced, but a rank needs more memory than the GPU has
};
inline constexpr int prune_reason_count = 9;
// "global batch not a multiple of micro-batch × dp", ...
[[nodiscard]] const char* describe(PruneReason r);
// "batch_split", ... (JSON keys)
[[nodiscard]] const char* name_of(PruneReason r);

// What holds a layout back most (docs/CLI.md, perfsim search):
//   memory      it does not fit, or its worst rank leaves under 5% of the GPU's memory free;
//   bubble      else, the pipeline bubble (bubble fraction · step time) when it is the larger
//               of bubble and exposed communication and at least 5% of the step;
//   communication  likewise, the exposed communication of the slowest rank;
//   compute     neither reaches 5% of the step: the kernels themselves set the pace.
enum class Limiter { compute, memory, bubble, communication };
[[nodiscard]] const char* name_of(Limiter l);
inline constexpr double limiter_share = 0.05;

struct SearchCandidate {
  ParallelSpec layout;
  int64_t micro_batch = 1;   // sequences per micro-batch (inference: the batch per replica)
  int64_t grad_accum = 1;    // micro-batches per optimizer step
  bool recompute = false;    // full activation recompute added on top of the stack
  double tokens_per_second = 0, tokens_per_second_per_gpu = 0;
  double mfu = 0;
  double step_time = 0;      // seconds
  double bubble_fraction = 0, bubble_time = 0;  // of the step; seconds
  double exposed_communication = 0;             // seconds, the slowest rank's
  double memory_peak = 0;    // bytes on the worst rank
  int worst_rank = 0;        // its pipeline stage
  bool fits = true;
  Limiter limiter = Limiter::compute;
};

struct SearchResult {
  std::string model, hardware;            // names
  Workload workload;                      // the step's (its batch and grad_accum: the scenario's)
  int gpus = 0;
  int64_t global_batch = 0;               // sequences
  double memory_bytes = 0;                // the GPU's memory
  // Every priced layout: those that fit first, then by tokens/s (higher first), ties in
  // enumeration order.
  std::vector<SearchCandidate> layouts;
  int64_t enumerated = 0;                 // every combination of the space's candidates
  int64_t evaluated = 0;                  // built and priced
  int64_t fitting = 0;                    // evaluated and fitting memory
  int64_t pruned[prune_reason_count] = {};  // by reason (does_not_fit counts priced ones)
  std::string invalid_example;            // the first message of an invalid_other layout
};

// Searches the layouts of step `upto` of `stack` (its graph passes; its workload passes applied
// to `w`; its parallel passes replaced by each candidate's layout). `base` is the scenario's
// layout at that step: its dp sets the default global batch, its schedule and bucket size carry
// over. Throws ConfigError naming the field when the space is unusable (gpus < 1, an empty
// dimension, a global batch no micro-batch divides).
[[nodiscard]] SearchResult search_layouts(const ModelConfig& m, const Workload& w,
                                          const std::vector<StackStep>& stack, std::size_t upto,
                                          const ParallelSpec& base, const Hardware& hw,
                                          const SearchSpace& space);

}  // namespace perfsim
