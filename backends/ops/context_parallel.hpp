// The kernel shapes of a context-parallel rank's ops (OpAttrs::cp, cp_stride, ring_step): the
// rank graph is every cp rank's, so which positions its rows sit at and which half of a ring
// block it computes follow from the executing rank (core/builders/rank.hpp). Shapes of ops without
// context parallelism come back unchanged. The GPU backend uses them too.
#pragma once
#include "backends/ops/kernel_shapes.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::ops {

// The positions of the rows of each sequence: the rank's two load-balanced chunks.
[[nodiscard]] RopeShape on_context_rank(RopeShape r, const Op& op, int rank);
[[nodiscard]] EmbeddingShape on_context_rank(EmbeddingShape e, const Op& op, int rank);
// A ring block's part (q_first, the keys used) or the own block (causal), for flash_attention(_bwd).
[[nodiscard]] AttnShape on_context_rank(AttnShape a, const Op& op, int rank);

}  // namespace perfsim::ops
