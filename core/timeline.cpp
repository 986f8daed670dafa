// The step timeline: ops placed on their streams in program order, each waiting for its stream
// and for the ops that wrote its inputs; the makespan is the predicted step time.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "core/cost_model.hpp"

namespace perfsim {

double timeline_makespan(const Graph& g, const std::vector<OpCost>& costs) {
  if (costs.size() != g.ops.size())
    throw std::logic_error(
        fmt::format("timeline: {} costs for {} ops", costs.size(), g.ops.size()));
  // When each tensor's latest write finishes (persistent tensors are ready at 0).
  std::vector<double> written_at(g.tensors.size(), 0.0);
  std::vector<double> stream_free(1, 0.0);
  auto tensor_index = [&](const Op& op, int id) {
    if (id < 0 || static_cast<std::size_t>(id) >= written_at.size())
      throw std::logic_error(fmt::format("timeline: op '{}' uses unknown tensor {}", op.name, id));
    return static_cast<std::size_t>(id);
  };
  double makespan = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.stream < 0)
      throw std::logic_error(fmt::format("timeline: op '{}' has stream {}", op.name, op.stream));
    const auto s = static_cast<std::size_t>(op.stream);
    if (s >= stream_free.size()) stream_free.resize(s + 1, 0.0);
    // List scheduling in program order: an op starts once its stream is idle and every
    // producer of its inputs has finished (the semantics of CUDA streams plus events).
    double start = stream_free[s];
    for (int id : op.inputs) start = std::max(start, written_at[tensor_index(op, id)]);
    // A sampled op stands for `count` identical ops run back to back.
    const double finish = start + costs[i].time * op.count;
    stream_free[s] = finish;
    for (int id : op.outputs) written_at[tensor_index(op, id)] = finish;
    makespan = std::max(makespan, finish);
  }
  return makespan;
}

}  // namespace perfsim
