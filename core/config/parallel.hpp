// How a step is spread over GPUs: the degrees of data, tensor, pipeline and context
// parallelism, sequence parallelism, ZeRO/FSDP sharding and the pipeline schedule, as a
// scenario states them. Plain data with its checks; turning it into per-rank graphs is the
// parallel plans' part.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/model.hpp"
#include "core/config/workload.hpp"

namespace perfsim {

enum class PipelineSchedule { gpipe, one_f_one_b, interleaved };
// FSDP's sharding strategies (PyTorch names): full_shard shards parameters, gradients and
// optimizer state (ZeRO-3); shard_grad_op gradients and optimizer state (ZeRO-2);
// hybrid_shard full_shard inside a node, replicated across nodes.
enum class FsdpStrategy { none, full_shard, shard_grad_op, hybrid_shard };

struct ParallelSpec {
  int dp = 1;   // data-parallel replicas
  int tp = 1;   // tensor-parallel ranks (Megatron column/row splits)
  int pp = 1;   // pipeline stages
  int cp = 1;   // context-parallel ranks (ring attention over the sequence)
  int ep = 1;   // expert-parallel ranks, carved from the data-parallel ones (MoE models)
  bool sp = false;  // sequence parallelism beside tensor parallelism
  int zero = 0;     // ZeRO stage 0-3 over the data-parallel ranks
  FsdpStrategy fsdp = FsdpStrategy::none;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int interleave = 1;              // model chunks per pipeline stage (interleaved 1F1B)
  double bucket_bytes = 25.0 * 1024 * 1024;  // DDP gradient buckets (PyTorch's 25 MiB)
  // GPUs of one node on the hardware it runs on: hybrid_shard shards within a node. 0: unknown
  // (hybrid_shard then shards over every data-parallel rank). set_node_gpus fills it.
  int node_gpus = 0;

  // GPUs the layout spans: dp · tp · pp · cp (expert parallelism reuses data-parallel ranks).
  [[nodiscard]] int gpus() const { return dp * tp * pp * cp; }
  // Ranks are numbered as Megatron-LM numbers them, tensor-parallel ranks adjacent, then
  // context, data and pipeline: the distance between consecutive ranks of each kind of group.
  [[nodiscard]] int tp_stride() const { return 1; }
  [[nodiscard]] int cp_stride() const { return tp; }
  [[nodiscard]] int dp_stride() const { return tp * cp; }
  [[nodiscard]] int pp_stride() const { return tp * cp * dp; }
  // Whether any degree is above 1 or any sharding is on: a single-GPU step otherwise.
  [[nodiscard]] bool parallel() const;
  // The schedule that runs: 1F1B over several chunks a stage is interleaved 1F1B.
  [[nodiscard]] PipelineSchedule pipeline_schedule() const {
    return interleave > 1 && schedule == PipelineSchedule::one_f_one_b ? PipelineSchedule::interleaved : schedule;
  }
  // The ZeRO stage the settings amount to: fsdp's strategy when it has one, else `zero`.
  [[nodiscard]] int sharding_stage() const;
  // Data-parallel ranks gradients are averaged over: dp · cp (context-parallel ranks hold the
  // same weights, each a part of the sequence), consecutive at stride tp.
  [[nodiscard]] int gradient_ranks() const { return dp * cp; }
  // Ranks one copy of the sharded training state spans: every gradient rank, or with
  // hybrid_shard those on one node (a divisor of gradient_ranks()); replicas of it across nodes.
  [[nodiscard]] int shard_ranks() const;
};

// The layers pipeline stage `stage` of `pp` holds out of `layers`: an equal share, the first
// layers % pp stages one more (uneven stages, allowed; describe_stages says how they split).
[[nodiscard]] int64_t stage_layers(int64_t layers, int pp, int stage);
// The index of the first layer of `stage`.
[[nodiscard]] int64_t stage_first_layer(int64_t layers, int pp, int stage);
// "21 layers on stages 0-1, 20 on stages 2-3 (uneven)" when `pp` stages split `layers`
// unevenly; "" when every stage holds the same number.
[[nodiscard]] std::string describe_stages(int64_t layers, int pp);

[[nodiscard]] const char* name_of(PipelineSchedule s);
[[nodiscard]] const char* name_of(FsdpStrategy s);
// Every name, for parsing and "did you mean".
[[nodiscard]] std::vector<std::string> schedule_names();
[[nodiscard]] std::vector<std::string> fsdp_names();

// Sets dp so the layout spans `gpus` GPUs with its other degrees: dp = gpus / (tp · pp · cp).
// Throws ConfigError naming `field` when gpus is not a multiple of tp · pp · cp.
void set_gpus(ParallelSpec& p, int gpus, const char* field = "parallel.gpus");

// "tp=8 pp=4 dp=16 sp zero=1 interleaved×2" (degrees of 1 and defaults left out); "single GPU"
// when nothing is parallel.
[[nodiscard]] std::string describe(const ParallelSpec& p);

// Throws ConfigError, one line naming the field of `parallel` and what to change, when the
// layout cannot run `m` on `w`: a degree below 1; sp without tensor parallelism (tp = 1); tp
// not dividing the heads, the KV heads or the MLP width; pp above the layers (or pp · interleave above them); ep without a
// mixture-of-experts model or not dividing dp; cp that cannot split the sequence into 2·cp
// equal chunks (causal load balance) or on a decode step; ZeRO or FSDP on an inference
// workload, a stage outside 0-3, or zero and fsdp contradicting each other; an interleaved
// schedule with micro-batches (grad_accum) not a multiple of pp; and, when `gpus` > 0, a
// product of degrees that is not the GPU count.
void validate(const ParallelSpec& p, const ModelConfig& m, const Workload& w, int gpus = 0);

}  // namespace perfsim
