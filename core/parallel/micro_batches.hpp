// A pipeline stage's optimizer step over all its micro-batches, as one graph a backend runs.
//
// A stage graph holds one micro-batch: its forward and backward ops stand for grad_accum of them
// (Op::count), which is all the cost model needs. To run the schedule for real, each micro-batch
// gets its own copy of those ops and of the activations and inputs they touch, issued in the
// order the schedule runs passes on this stage (pipeline_order): its sends and receives then pair
// up with the neighbouring stages' copies, and each micro-batch's activations live from its
// forward to its backward, so the stage holds as many at once as the schedule keeps in flight.
// An interleaved stage holds several model chunks (Op::chunk): a slot of the schedule runs its
// pass's ops of its chunk only.
// Gradients accumulate over the micro-batches (the builders' accumulating weight gradients);
// what runs once per step — the data-parallel gradient collectives, the tied embedding's and the
// sequence-parallel norms' all-reduces, the optimizer — runs after the last micro-batch's
// backward (of the chunk it follows in the stage graph), where it sits in the stage graph.
#pragma once
#include <string>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/config/parallel.hpp"

namespace perfsim {

struct MicroBatchGraph {
  Graph graph;              // every micro-batch's passes, in the schedule's order
  std::vector<int> origin;  // per op of `graph`: the stage graph's op it is a copy of
  int micro_batches = 1;
};

// Empty when the step of `stage` (a stage graph of layout `p`) can run as a MicroBatchGraph;
// otherwise why not, as a line for the report: ZeRO-2/3 or FSDP (they reduce or gather per
// micro-batch) are not.
[[nodiscard]] std::string micro_batch_unsupported_reason(const Graph& stage, const ParallelSpec& p);

// The step of pipeline stage `stage_index` over its grad_accum micro-batches under `p`'s
// schedule. Copies are named "mb<i>/<name>"; a copied input takes micro-batch i of the rank's
// part of its whole (Shard::micro). The loss's gradient is that of the mean over every
// micro-batch (OpAttrs::loss_rows). Throws ConfigError when micro_batch_unsupported_reason says
// why not, std::logic_error when a once-per-step op reads a micro-batch's tensor.
[[nodiscard]] MicroBatchGraph unroll_micro_batches(const Graph& stage, const ParallelSpec& p, int stage_index);

// "mb<i>/<name>", and back: the micro-batch a copy's name holds (−1 for a name of no copy) and
// the stage graph's name.
[[nodiscard]] std::string micro_batch_name(const std::string& name, int micro);
[[nodiscard]] int micro_batch_of(const std::string& name, std::string* base = nullptr);

}  // namespace perfsim
