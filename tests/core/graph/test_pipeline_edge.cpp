// Pipeline transfers' other ends: neighbours in forward and backward, the ring of interleaved
// chunks, and edge colours that keep a stage's sends and receives of one direction apart.
#include <doctest/doctest.h>

#include "core/errors.hpp"
#include "core/graph/pipeline_edge.hpp"

using namespace perfsim;

namespace {

Op transfer(bool sends, Stage stage, int stride) {
  Op op;
  op.kind = OpKind::collective;
  op.name = "t";
  op.attrs.collective = Collective::send_recv;
  op.attrs.group = 2;
  op.attrs.group_stride = stride;
  op.stage = stage;
  if (sends) op.inputs = {0};
  else op.outputs = {0};
  return op;
}

}  // namespace

TEST_CASE("pipeline edge: neighbours, the ring's wrap, ranks of a stage pp_stride apart") {
  // 3 stages of 2 ranks (pp_stride 2): rank 3 is stage 1, place 1.
  const Op fwd_send = transfer(true, Stage::forward, 2), fwd_recv = transfer(false, Stage::forward, 2);
  const Op bwd_send = transfer(true, Stage::backward, 2), bwd_recv = transfer(false, Stage::backward, 2);
  CHECK(pipeline_edge(fwd_send, 3, 6).peer == 5);
  CHECK(pipeline_edge(fwd_recv, 3, 6).peer == 1);
  CHECK(pipeline_edge(bwd_send, 3, 6).peer == 1);
  CHECK(pipeline_edge(bwd_recv, 3, 6).peer == 5);
  CHECK(pipeline_edge(bwd_recv, 3, 6).backward);
  CHECK_FALSE(pipeline_edge(fwd_recv, 3, 6).backward);
  // The last stage's chunk sends on to stage 0 (interleaved), and stage 0 receives from it.
  CHECK(pipeline_edge(fwd_send, 5, 6).peer == 1);
  CHECK(pipeline_edge(fwd_recv, 1, 6).peer == 5);
  CHECK(pipeline_edge(fwd_send, 5, 6).edge == 2);
  CHECK(pipeline_edge(fwd_recv, 1, 6).edge == 2);
  // Both ends of an edge agree on it; a stage's two edges differ in colour, the odd ring's
  // wrap edge included (colours 0, 1, 2).
  for (int rank = 0; rank < 6; ++rank) {
    CAPTURE(rank);
    const PipelineEdge out = pipeline_edge(fwd_send, rank, 6);
    const PipelineEdge in = pipeline_edge(fwd_recv, out.peer, 6);
    CHECK(in.peer == rank);
    CHECK(in.edge == out.edge);
    CHECK(in.colour == out.colour);
    CHECK(pipeline_edge(fwd_recv, rank, 6).colour != out.colour);
    CHECK(pipeline_edge(bwd_send, rank, 6).colour != pipeline_edge(bwd_recv, rank, 6).colour);
  }
  CHECK(pipeline_colours(3, true) == 3);
  CHECK(pipeline_colours(3, false) == 2);
  CHECK(pipeline_colours(2, false) == 1);
  CHECK(pipeline_colours(2, true) == 2);
  CHECK(pipeline_colours(4, true) == 2);
  CHECK_THROWS_AS((void)pipeline_edge(fwd_send, 0, 5), NotExecutable);  // 5 ranks: no stages of 2
}
