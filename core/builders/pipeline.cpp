// The point-to-point transfers at a pipeline stage's edges: the activation received from the
// previous stage and sent to the next in forward, their gradients the other way in backward
// (with interleaved chunks, the previous and next virtual stages: stage pp − 1 sends on to
// stage 0). Four streams: sends and receives of each direction.
#include "core/builders/common.hpp"
#include "core/builders/streams.hpp"

namespace perfsim::build {

namespace {

OpAttrs send_recv_attrs(const RankShape& r) {
  OpAttrs a;
  a.collective = Collective::send_recv;
  a.group = 2;  // the pair of neighbouring stages
  a.group_stride = r.pp_stride;
  return a;  // payload_bytes 0: the activation it moves, in its precision
}

}  // namespace

int GraphBuilder::pipeline_recv(const std::string& name, int64_t rows, Stage stage) {
  const int y = tensor(name + ".out", {rows, m_model.hidden}, TensorRole::activation);
  const int id = op(OpKind::collective, name, {}, {y}, send_recv_attrs(m_rank), -1, stage);
  m_graph.ops[static_cast<std::size_t>(id)].stream =
      stage == Stage::backward ? pipeline_grad_recv_stream : pipeline_recv_stream;
  return y;
}

void GraphBuilder::pipeline_send(const std::string& name, int x, Stage stage) {
  const int id = op(OpKind::collective, name, {x}, {}, send_recv_attrs(m_rank), -1, stage);
  m_graph.ops[static_cast<std::size_t>(id)].stream = stage == Stage::backward ? pipeline_grad_stream : pipeline_stream;
}

}  // namespace perfsim::build
