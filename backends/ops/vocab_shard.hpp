// Which ops run over a vocabulary the tensor-parallel ranks split (Megatron's vocab-parallel
// embedding and cross-entropy): the operand that carries the split and the dimension it is
// split along. Every backend that executes ranks decides by these.
#pragma once
#include "core/graph/graph.hpp"

namespace perfsim::ops {

// The vocabulary operand of an embedding (its table), embedding_bwd (the table's gradient) or
// cross_entropy (the logits), and the dimension the vocabulary runs along in it (rows of a
// table, columns of the logits); nullptr for other kinds or a missing operand.
struct VocabOperand {
  const Tensor* tensor = nullptr;
  int vocab_dim = 0;
};
[[nodiscard]] VocabOperand vocab_operand(const Op& op, const Graph& g);

// The operand's split among ranks (its first shard, when in more than one part), or nullptr.
[[nodiscard]] const Shard* vocab_shard(const Op& op, const Graph& g);

// Whether `op` reads or writes a vocabulary split among ranks.
[[nodiscard]] bool on_vocab_shard(const Op& op, const Graph& g);

}  // namespace perfsim::ops
