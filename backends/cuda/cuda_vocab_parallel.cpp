// Vocabulary-parallel ops on GPU ranks (see cuda_vocab_parallel.hpp): the host side, mirroring
// backends/cpu/cpu_vocab_parallel.cpp step by step.
#include "backends/cuda/cuda_vocab_parallel.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <stdexcept>

#include "backends/ops/context_parallel.hpp"
#include "backends/ops/op_shapes.hpp"
#include "backends/ops/vocab_shard.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/vocab_parallel.cuh"

namespace perfsim::cuda {

std::string rank_op_unsupported_reason(const Op& op, const Graph& g) {
  if (op.kind == OpKind::collective) return NcclRanks::unsupported_reason(op, g);
  if (std::string why = op_unsupported_reason(op, g); !why.empty()) return why;
  if (!ops::on_vocab_shard(op, g)) return {};
#ifndef PERFSIM_HAVE_NCCL
  return fmt::format("perfsim was built without NCCL: GPU ranks cannot run the vocabulary-parallel '{}'", op.name);
#else
  const ops::VocabOperand v = ops::vocab_operand(op, g);
  if (v.tensor->shard.front().dim != v.vocab_dim)
    return fmt::format("GPU ranks split the vocabulary of '{}' along dimension {} of '{}' only (its shard has {})",
                       op.name, v.vocab_dim, v.tensor->name, v.tensor->shard.front().dim);
  return {};
#endif
}

template <class T>
void run_vocab_parallel(const Op& op, const Graph& g, const std::vector<void*>& in, const std::vector<void*>& out,
                        NcclRanks& ranks, const std::function<void*(std::size_t)>& scratch,
                        const std::function<void*(std::size_t)>& extra, cudaStream_t stream) {
  const Shard& s = *ops::vocab_shard(op, g);
  const RankGroup group{s.parts, s.stride};
  const int place = group.place(ranks.rank());
  auto I = [&](std::size_t i) { return static_cast<const T*>(in.at(i)); };
  auto O = [&](std::size_t i) { return static_cast<T*>(out.at(i)); };
  auto ids = [&](std::size_t i) { return static_cast<const int32_t*>(in.at(i)); };
  switch (op.kind) {
    case OpKind::embedding: {
      // e.vocab: this rank's rows; positions: its chunks of each sequence under context parallelism
      const ops::EmbeddingShape e = ops::on_context_rank(ops::embedding_shape(op, g), op, ranks.rank());
      const T* positions = in.size() > 2 && place == 0 ? I(2) : nullptr;
      vocab_embedding<T>(ids(0), I(1), positions, O(0), e, place * e.vocab, stream);
      return;
    }
    case OpKind::embedding_bwd: {
      const ops::EmbeddingShape e = ops::on_context_rank(ops::embedding_shape(op, g), op, ranks.rank());
      const bool with_pos = out.size() > 1;
      auto* ws = static_cast<float*>(
          scratch(static_cast<std::size_t>(embedding_bwd_workspace_floats<T>(e, with_pos)) * sizeof(float)));
      vocab_embedding_bwd<T>(ids(0), I(1), O(0), with_pos ? O(1) : nullptr, e, place * e.vocab, ws, stream);
      return;
    }
    case OpKind::cross_entropy: {
      const Tensor& logits = g.tensor(op.inputs[0]);
      const int64_t rows = logits.shape.front(), cols = logits.elements() / rows;  // this rank's columns
      auto* row_max = static_cast<float*>(extra(2 * static_cast<std::size_t>(rows) * sizeof(float)));
      float* row_sum = row_max + rows;
      // The whole row's maximum, then its sum of exponentials, each over every rank's columns.
      vocab_row_max<T>(I(0), row_max, rows, cols, stream);
      ranks.all_reduce(row_max, static_cast<std::size_t>(rows), group, NcclRanks::Reduction::max, stream, op.name);
      vocab_row_sum_exp<T>(I(0), row_max, row_sum, rows, cols, stream);
      ranks.all_reduce(row_sum, static_cast<std::size_t>(rows), group, NcclRanks::Reduction::sum, stream, op.name);
      const float inv_rows = 1.0f / static_cast<float>(op.attrs.loss_rows > 0 ? op.attrs.loss_rows : rows);
      vocab_cross_entropy_loss<T>(I(0), ids(1), row_max, row_sum, static_cast<float*>(out.at(0)),
                                  out.size() > 1 ? O(1) : nullptr, rows, cols, place * cols, s.parts, inv_rows,
                                  stream);
      return;
    }
    default: throw std::logic_error(fmt::format("'{}' is no vocabulary op", op.name));
  }
}

#define PERFSIM_CUDA_INSTANTIATE_RUN_VOCAB(T)                                                                      \
  template void run_vocab_parallel<T>(const Op&, const Graph&, const std::vector<void*>&, const std::vector<void*>&, \
                                      NcclRanks&, const std::function<void*(std::size_t)>&,                         \
                                      const std::function<void*(std::size_t)>&, cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_RUN_VOCAB(float)
PERFSIM_CUDA_INSTANTIATE_RUN_VOCAB(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_RUN_VOCAB(__half)

}  // namespace perfsim::cuda
