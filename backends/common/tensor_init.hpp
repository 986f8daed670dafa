// Values the CPU backend puts into persistent tensors before running a graph: random but
// sane (weights ~ N(0, 0.02), norm gains 1, token ids within the vocabulary, block tables
// naming each page once, expert routings filling each buffer row at most once, optimizer
// moments 0, gradients 0 as after zero_grad()), so softmax, norms and AdamW stay finite however many times the graph runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/graph.hpp"

namespace perfsim::host {

// block_table: a shuffled permutation of the page ids 0 .. n − 1 (a paged cache's block
// table: every sequence's pages scattered through the pool, none shared).
// expert_ids / expert_slots: the routing of a mixture-of-experts op that reads them rather
// than a router's output, round robin: choice i (= t·top_k + j) goes to expert i mod experts
// at slot i div experts (−1 from capacity on), a balanced routing the two tensors agree on.
enum class InitKind { normal, ones, zeros, token_ids, block_table, expert_ids, expert_slots };

struct InitSpec {
  InitKind kind = InitKind::normal;
  float stddev = 0.02f;  // normal
  int64_t vocab = 1;     // token_ids: uniform in [0, vocab)
  int64_t experts = 1, capacity = 0;  // expert_ids, expert_slots
};

// The name a tensor's values are derived from: its own, except that a host tensor
// "<x>.host" (the data uploaded into "<x>", see GraphBuilder::upload) holds the values "<x>"
// gets without host data, so a graph reads the same data whether it uploads it or not.
[[nodiscard]] std::string data_name(const Tensor& t);

// The scale of an fp8 KV cache `id` (value = stored · scale): OpAttrs::kv_scale of the first op
// reading or writing it (the fp8_kv pass gives them all one), 1 when none does.
[[nodiscard]] float kv_scale_of(const Graph& g, int id);

// How tensor t of g is initialized.
[[nodiscard]] InitSpec init_spec(const Graph& g, const Tensor& t);

// Fills buffers[id] of every persistent tensor per init_spec (host tensors included);
// deterministic for a seed and data_name (independent of the thread count and of tensor ids).
// A shard (Tensor::shard) gets its part of its whole's values, the part global rank `rank`
// holds, so every layout of a parallel step starts from the unsharded step's values.
// An fp8 tensor (a KV cache of the fp8_kv pass) holds its values as e4m3(value / kv_scale),
// the scale its ops read it with; tensors of a storage the host has none of are left as they are.
void fill_persistent(const Graph& g, const std::vector<void*>& buffers, uint64_t seed, int rank = 0);

}  // namespace perfsim::host
