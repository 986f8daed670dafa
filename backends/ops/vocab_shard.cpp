// The vocabulary operand of an op and its split (see vocab_shard.hpp).
#include "backends/ops/vocab_shard.hpp"

namespace perfsim::ops {

VocabOperand vocab_operand(const Op& op, const Graph& g) {
  switch (op.kind) {
    case OpKind::embedding: return {op.inputs.size() > 1 ? &g.tensor(op.inputs[1]) : nullptr, 0};
    case OpKind::embedding_bwd: return {op.outputs.empty() ? nullptr : &g.tensor(op.outputs[0]), 0};
    case OpKind::cross_entropy: return {op.inputs.empty() ? nullptr : &g.tensor(op.inputs[0]), 1};
    default: return {};
  }
}

const Shard* vocab_shard(const Op& op, const Graph& g) {
  const Tensor* t = vocab_operand(op, g).tensor;
  return t != nullptr && !t->shard.empty() && t->shard.front().parts > 1 ? &t->shard.front() : nullptr;
}

bool on_vocab_shard(const Op& op, const Graph& g) { return vocab_shard(op, g) != nullptr; }

}  // namespace perfsim::ops
