// The vocabulary-parallel ops (Megatron's vocab-parallel embedding and cross-entropy) on GPU
// ranks, with the semantics of backends/cpu/cpu_vocab_parallel.hpp: each rank holds rows
// [offset, offset + V/tp) of the table (its Tensor::shard) and columns [offset, offset + V/tp)
// of the logits, offset = its place in the shard's group × V/tp.
//   embedding: a token outside the rank's rows gives a zero row; the learned positions are added
//     by the group's first rank only, so the all-reduce after the op sums each once;
//   embedding_bwd: only the rank's rows receive gradient (every rank's position gradient is the
//     whole one, as the positions are replicated);
//   cross_entropy: the row maxima, then the sums of exponentials, are all-reduced (max, then
//     sum) by NCCL within the group on the op's stream, so the log-sum-exp is the whole
//     vocabulary's; each rank writes lse/tp minus the target logit where it holds the target
//     (the all-reduce after the op sums the loss), and its dlogits columns of
//     (softmax − onehot)/rows (rows: the op's loss_rows when set).
// OpExecutor::run_generic stages the operands to one float type T as for every generic kernel
// and dispatches here when the graph is a rank's (kernels/vocab_parallel.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/nccl_ranks.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cuda {

// "" when an op of a rank's graph can run on a GPU rank: collectives through NCCL (NcclRanks),
// the vocabulary-parallel ops here, every other op as op_unsupported_reason has it.
[[nodiscard]] std::string rank_op_unsupported_reason(const Op& op, const Graph& g);

// Runs vocabulary-parallel op `op` (ops::on_vocab_shard) with its operands staged to T:
// in/out as run_generic passes them to the kernels. scratch: the op's planned workspace (the
// fp32 sums of 16-bit embedding gradients); extra: device memory released with it (the loss's
// 2 · rows floats of row statistics).
template <class T>
void run_vocab_parallel(const Op& op, const Graph& g, const std::vector<void*>& in, const std::vector<void*>& out,
                        NcclRanks& ranks, const std::function<void*(std::size_t)>& scratch,
                        const std::function<void*(std::size_t)>& extra, cudaStream_t stream);

}  // namespace perfsim::cuda
