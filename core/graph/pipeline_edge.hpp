// The other end of a pipeline transfer (a send/recv op on a pipeline stream), as every executor
// must pair it. Stage s of pp sends its activations on to stage s + 1 and its gradients back to
// s − 1, modulo pp: with interleaved chunks stage pp − 1's chunk c feeds stage 0's chunk c + 1
// (and the gradient comes back the same way), so the stages form a ring. Ranks of one stage
// are the pipeline's outermost dimension: rank = stage · pp_stride + its place in the stage.
#pragma once
#include <string>

#include "core/graph/graph.hpp"

namespace perfsim {

struct PipelineEdge {
  int peer = 0;           // world rank of the other end
  bool backward = false;  // a gradient (backward) rather than an activation (forward)
  // Transfers between stages e and e + 1 (mod pp) cross edge e; its colour (0, 1 or 2) differs
  // from both neighbouring edges', so a stage's sends and its receives of one direction never
  // share a channel (an executor gives each colour and direction a communicator of its own).
  int edge = 0;
  int colour = 0;
};

// `op` on world rank `rank` of `world` ranks (group_stride: pp_stride). Throws NotExecutable
// when the ranks do not form whole stages.
[[nodiscard]] PipelineEdge pipeline_edge(const Op& op, int rank, int world);

// Colours the edges of a pipeline of `stages` use (ring: the interleaved schedule's wrap edge
// too): 1, 2 or 3.
[[nodiscard]] int pipeline_colours(int stages, bool ring);

}  // namespace perfsim
