// Kernel shapes on a context-parallel rank (see context_parallel.hpp).
#include "backends/ops/context_parallel.hpp"

#include "core/builders/rank.hpp"

namespace perfsim::ops {

namespace {

int place_in_ring(const Op& op, int rank) {
  const int stride = op.attrs.cp_stride > 0 ? op.attrs.cp_stride : 1;
  return (rank / stride) % op.attrs.cp;
}

template <class Shape>
Shape with_chunks(Shape s, const Op& op, int rank) {
  if (op.attrs.cp <= 1) return s;
  const build::ContextRows rows = build::context_rows(op.attrs.cp, place_in_ring(op, rank), s.seq);
  s.chunk = rows.chunk;
  s.second = s.position + rows.second;
  s.position += rows.first;
  return s;
}

}  // namespace

RopeShape on_context_rank(RopeShape r, const Op& op, int rank) { return with_chunks(r, op, rank); }

EmbeddingShape on_context_rank(EmbeddingShape e, const Op& op, int rank) { return with_chunks(e, op, rank); }

AttnShape on_context_rank(AttnShape a, const Op& op, int rank) {
  if (op.attrs.cp <= 1) return a;
  const build::RingBlockRows b = build::ring_block_rows(op.attrs.cp, place_in_ring(op, rank), op.attrs.ring_step, a.seq_q);
  a.causal = b.causal;
  a.q_first = b.q_first;
  a.seq_kv = b.kv_rows;  // of kv_capacity rows a sequence; dK/dV rows past it are written 0
  return a;
}

}  // namespace perfsim::ops
