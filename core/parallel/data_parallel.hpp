// Data parallelism on one rank's training graph. Every rank runs the same graph on a
// micro-batch of its own, so one graph stands for all dp ranks; what data parallelism adds is
// the communication that averages the gradients and, with ZeRO, the sharding of the training
// state over the ranks:
//   stage 0 (PyTorch DDP): each gradient bucket (ParallelSpec::bucket_bytes; the first 1 MiB)
//     all-reduced on a communication stream once its last gradient is written in backward,
//     through a bucket buffer of its own beside the gradients (gradient_as_bucket_view off,
//     DDP's default);
//   stage 1 (ZeRO-1): AdamW states and master weights sharded; each bucket reduce-scattered
//     into a gradient shard (fp32 with master weights) for the rank's AdamW, which updates its
//     shard of the weights, all-gathered after the step;
//   stage 2 (ZeRO-2, FSDP shard_grad_op): the full gradients live only until their bucket is
//     reduce-scattered (every micro-batch);
//   stage 3 (ZeRO-3, FSDP full_shard): the weights sharded too. Before a layer runs, forward
//     and again backward, its weights are all-gathered into full-size buffers, one layer
//     ahead on a stream of their own (prefetch), and freed after the layer (reshard). Weights
//     outside the layers (embedding, final norm, lm_head) are gathered once and kept.
// Gradients are bucketed layer by layer (a bucket never spans two layers), in the order
// backward writes them. The ops added stand for every layer as the layer's ops do (counts).
#pragma once
#include "core/builders/streams.hpp"  // gather_stream, gradient_stream: the plan's collectives
#include "core/graph/graph.hpp"
#include "core/config/parallel.hpp"

namespace perfsim {

// PyTorch DDP's first bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES): the last
// layers' gradients go out early.
inline constexpr double first_bucket_bytes = 1024.0 * 1024.0;

// Rewrites `g` (a training graph, every optimization pass applied) into one data-parallel
// rank's graph for p.dp ranks at ZeRO stage p.sharding_stage(). Nothing changes for one rank at
// stage 0. Throws ConfigError when g holds no optimizer step.
void apply_data_parallel(Graph& g, const ParallelSpec& p);

}  // namespace perfsim
