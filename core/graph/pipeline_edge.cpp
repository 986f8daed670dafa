// pipeline_edge (see pipeline_edge.hpp).
#include "core/graph/pipeline_edge.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

namespace {

int colour_of(int edge, int stages) {
  // Alternating colours; an odd ring's wrap edge (stages − 1 → 0) meets two edges of colour 0.
  return stages % 2 == 1 && edge == stages - 1 ? 2 : edge % 2;
}

}  // namespace

PipelineEdge pipeline_edge(const Op& op, int rank, int world) {
  const int stride = op.attrs.group_stride;
  if (stride < 1 || world % stride != 0 || world / stride < 2)
    throw NotExecutable(fmt::format("pipeline transfer '{}': {} ranks do not make stages of {} ranks", op.name,
                                    world, stride));
  const int stages = world / stride, stage = rank / stride, place = rank % stride;
  PipelineEdge e;
  e.backward = op.stage == Stage::backward;
  const bool sends = !op.inputs.empty();
  const bool up = sends != e.backward;  // towards stage + 1: a forward send, a backward receive
  const int other = (stage + (up ? 1 : stages - 1)) % stages;
  e.peer = other * stride + place;
  e.edge = up ? stage : other;
  e.colour = colour_of(e.edge, stages);
  return e;
}

int pipeline_colours(int stages, bool ring) {
  const int edges = ring ? stages : stages - 1;
  if (edges <= 1) return 1;
  return ring && stages % 2 == 1 ? 3 : 2;
}

}  // namespace perfsim
