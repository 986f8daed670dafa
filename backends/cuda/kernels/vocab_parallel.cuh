// Kernels of the vocabulary-parallel ops on GPU ranks, mirroring backends/cpu/cpu_vocab_parallel.cpp:
// the tensor-parallel ranks split the vocabulary, and this rank holds rows [offset, offset +
// e.vocab) of the embedding table and columns [offset, offset + cols) of the logits (offset =
// its place in the group × its share). Every kernel computes in fp32 and rounds once when it
// stores, as the CPU version does on its fp32 copies. The cross-entropy is three launches
// around the two all-reduces its caller issues between them (row maxima, then sums of
// exponentials), so the log-sum-exp is the whole vocabulary's. Asynchronous on `stream`,
// capturable.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

// x[t] = table[ids[t] − offset] where the id falls in this rank's rows, else 0; plus
// positions[e.position + t % e.seq] when `positions` is given (the caller gives it on the
// group's first rank only, so the all-reduce after the op adds the positions once).
template <class T> void vocab_embedding(const int32_t* ids, const T* table, const std::type_identity_t<T>* positions,
                                        T* x, const ops::EmbeddingShape& e, int64_t offset, cudaStream_t stream);

// dtable[ids[t] − offset] += dx[t] for the ids in this rank's rows; dpositions[e.position +
// t % e.seq] += dx[t] for every token (the positions are replicated: each rank's gradient is the
// whole one). Overwrites, or adds into with e.accumulate. Workspace: as embedding_bwd
// (embedding_bwd_workspace_floats in embedding.cuh), none for fp32. Float atomics: the order of
// the sums (and the last bit) may vary between runs.
template <class T> void vocab_embedding_bwd(const int32_t* ids, const T* dx, T* dtable,
                                            std::type_identity_t<T>* dpositions, const ops::EmbeddingShape& e,
                                            int64_t offset, float* workspace, cudaStream_t stream);

// row_max[r] = max over this rank's columns of logits [rows, cols].
template <class T> void vocab_row_max(const T* logits, float* row_max, int64_t rows, int64_t cols,
                                      cudaStream_t stream);

// row_sum[r] = Σ over this rank's columns of exp(logits[r, c] − row_max[r]), row_max being the
// whole vocabulary's.
template <class T> void vocab_row_sum_exp(const T* logits, const float* row_max, float* row_sum, int64_t rows,
                                          int64_t cols, cudaStream_t stream);

// With lse = row_max[r] + log(row_sum[r]) (the whole vocabulary's): loss[r] = lse / parts −
// logits[r, targets[r] − offset] where this rank holds the target (else lse / parts), so the
// all-reduce after the op sums the loss; dlogits (optional, may be null) = (exp(x − lse) −
// onehot) · inv_rows on this rank's columns.
template <class T> void vocab_cross_entropy_loss(const T* logits, const int32_t* targets, const float* row_max,
                                                 const float* row_sum, float* loss, std::type_identity_t<T>* dlogits,
                                                 int64_t rows, int64_t cols, int64_t offset, int parts,
                                                 float inv_rows, cudaStream_t stream);

}  // namespace perfsim::cuda
