// One rank's share of the model under BuildOptions::parallel: the local head counts and widths
// tensor parallelism leaves it, whether sequence parallelism splits the tokens, the share of
// every sequence context parallelism leaves it (and which chunks, causal load balance), and
// which layers (and whether the embedding and the head) its pipeline stage holds.
#pragma once
#include <cstdint>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/config/model.hpp"
#include "core/config/workload.hpp"

namespace perfsim::build {

struct RankShape {
  int tp = 1;
  bool sp = false;  // sequence parallelism (only with tp > 1)
  int tp_stride = 1;
  int cp = 1;  // context-parallel ranks: each holds seq/cp tokens of every sequence
  int cp_stride = 1;
  int pp = 1;
  int stage = 0;
  int pp_stride = 1;
  int64_t first_layer = 0;  // the model's index of the stage's first layer
  int64_t layers = 0;       // layers of the stage
  // The stage's model chunks: one, or under the interleaved schedule (training) v of them,
  // chunk c being virtual stage c·pp + stage of pp·v (Megatron's layout): the model's index of
  // each one's first layer and its layers.
  std::vector<int64_t> chunk_first_layer{0};
  std::vector<int64_t> chunk_layers{0};
  // Per rank: attention heads, KV heads, the query and KV projection widths, the MLP width and
  // the vocabulary rows (padded up to a multiple of tp, as Megatron pads it).
  int64_t heads = 0, kv_heads = 0, q_dim = 0, kv_dim = 0, ffn = 0, vocab = 0;
  // Mixture of experts: the model's routed experts, those this rank holds (experts / ep), each
  // one's MLP width on this rank and the shared experts' combined width on it (both / tp).
  int ep = 1;
  int ep_stride = 1;  // expert-parallel ranks are consecutive data-parallel (or context) ranks
  int64_t experts = 0, local_experts = 0, expert_ffn = 0, shared_ffn = 0;
  int64_t top_k = 0;
  double capacity_factor = 1;

  [[nodiscard]] bool first_stage() const { return stage == 0; }
  [[nodiscard]] bool last_stage() const { return stage == pp - 1; }
  [[nodiscard]] int chunks() const { return static_cast<int>(chunk_layers.size()); }
  // Whether chunk `c` begins the model (the embedding: virtual stage 0) or ends it (the head).
  [[nodiscard]] bool model_begins(int c) const { return first_stage() && c == 0; }
  [[nodiscard]] bool model_ends(int c) const { return last_stage() && c == chunks() - 1; }
  [[nodiscard]] bool tensor_parallel() const { return tp > 1; }
  [[nodiscard]] bool context_parallel() const { return cp > 1; }
  [[nodiscard]] bool moe() const { return experts > 0; }
  [[nodiscard]] bool expert_parallel() const { return ep > 1; }
  // Rows of each expert's buffer when `tokens` tokens are routed: capacity_factor times an even
  // share, ceil(capacity_factor · tokens · top_k / experts), at least 1.
  [[nodiscard]] int64_t expert_capacity(int64_t tokens) const;
  // Tokens of one sequence this rank holds: seq/cp (validate has checked that 2·cp divides it).
  [[nodiscard]] int64_t local_seq(int64_t seq) const { return seq / cp; }
  // Rows of the regions outside the tensor-parallel GEMMs (norms, residuals, stage edges) for a
  // pass over `tokens` tokens: tokens/tp with sequence parallelism, else all of them. Throws
  // ConfigError when sequence parallelism cannot split them evenly.
  [[nodiscard]] int64_t rows(int64_t tokens) const;
};

// Causal load balance for context parallelism (Megatron-LM / Transformer Engine): a sequence is
// cut into 2·cp equal chunks and context-parallel rank `rank` holds chunks `rank` and
// 2·cp − 1 − `rank`, an early and a late one, so every rank's queries see the same number of
// keys under the causal mask. Throws ConfigError for cp < 1 or a rank outside 0 .. cp − 1.
struct ContextChunks {
  int first = 0, second = 0;
};
[[nodiscard]] ContextChunks context_chunks(int cp, int rank);
// Where a context-parallel rank's rows of one sequence sit in it: its local_seq = seq/cp rows are
// `chunk` rows of chunk `rank` from position `first`, then `chunk` rows of chunk 2·cp − 1 − `rank`
// from position `second` (cp = 1: one run, first 0 and second = chunk).
struct ContextRows {
  int64_t chunk = 0, first = 0, second = 0;
  [[nodiscard]] int64_t position(int64_t row) const { return row < chunk ? first + row : second + row - chunk; }
};
[[nodiscard]] ContextRows context_rows(int cp, int rank, int64_t local_seq);
// The part of ring attention's block `step` that rank `rank` computes (context_parallel.cpp): its
// local queries against the K/V of rank j = (rank − step) mod cp, both local_seq rows a sequence.
//   step 0 (j = rank): every query against the rank's own keys, causal (the local order follows
//     the positions);
//   j < rank: every query against chunk j, the block's first half (its second lies after them all);
//   j > rank: the queries of the second chunk against the whole block (the first precedes it).
// Either way half of the block's query × key rectangle, as many pairs as the causal block keeps.
struct RingBlockRows {
  bool causal = false;
  int64_t q_first = 0;  // the queries of each sequence before this row take no part
  int64_t kv_rows = 0;  // the keys of each sequence used, from the first
};
[[nodiscard]] RingBlockRows ring_block_rows(int cp, int rank, int step, int64_t local_seq);
// The (query, key) pairs the causal mask keeps for rank `rank`'s queries of one sequence of
// `seq` tokens (query at position p sees keys 0 .. p): the attention work the rank does. The
// same for every rank; cp = 1 gives seq·(seq + 1)/2.
[[nodiscard]] int64_t context_causal_pairs(int64_t seq, int cp, int rank);

// The rank's shape for `o`; throws ConfigError when the layout cannot run `m` on `w` (see
// validate(ParallelSpec, ...)) or the stage is outside 0 .. pp - 1.
[[nodiscard]] RankShape rank_shape(const ModelConfig& m, const Workload& w, const BuildOptions& o);

}  // namespace perfsim::build
