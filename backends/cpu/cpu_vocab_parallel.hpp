// Ops over a vocabulary the tensor-parallel ranks split (Megatron's vocab-parallel embedding and
// cross-entropy), run on CPU ranks: each rank holds rows [offset, offset + V/tp) of the table
// (its Tensor::shard) and columns [offset, offset + V/tp) of the logits.
//   embedding: a token outside the rank's rows gives a zero row; the learned positions are added
//     by the group's first rank only, so the all-reduce after the op sums each once;
//   embedding_bwd: only the rank's rows receive gradient (every rank's position gradient is the
//     whole one, as the positions are replicated);
//   cross_entropy: the row maxima and sums of exponentials are exchanged within the group, so
//     the log-sum-exp is the whole vocabulary's; each rank writes lse/tp minus the target logit
//     where it holds the target, so the all-reduce after the op sums the loss, and its
//     dlogits columns of (softmax − onehot)/rows.
#pragma once
#include <vector>

#include "core/graph/graph.hpp"
#include "core/run/communicator.hpp"

namespace perfsim::cpu {

// Runs an op over a vocabulary split among ranks (ops::on_vocab_shard) for global rank ranks.rank(); buffers[id] holds each operand.
void execute_on_vocab_shard(const Op& op, const Graph& g, const std::vector<void*>& buffers, Communicator& ranks);

}  // namespace perfsim::cpu
