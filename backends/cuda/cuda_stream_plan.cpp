// plan_streams (see cuda_stream_plan.hpp).
#include "backends/cuda/cuda_stream_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

namespace {

void add_unique(std::vector<int>& v, int x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

StreamPlan plan_streams(const Graph& g) {
  StreamPlan p;
  p.streams.push_back(0);
  for (const Op& op : g.ops) {
    if (op.stream < 0) throw NotExecutable(fmt::format("cuda backend: op '{}' has stream {} (streams are >= 0)", op.name, op.stream));
    if (std::find(p.streams.begin(), p.streams.end(), op.stream) == p.streams.end()) p.streams.push_back(op.stream);
  }
  std::sort(p.streams.begin() + 1, p.streams.end());
  const std::size_t n_ops = g.ops.size(), n_tensors = g.tensors.size();
  p.lane.resize(n_ops);
  p.waits.resize(n_ops);
  p.after.resize(n_ops);
  p.lane_last.assign(p.streams.size(), -1);
  for (std::size_t i = 0; i < n_ops; ++i) {
    const auto it = std::find(p.streams.begin(), p.streams.end(), g.ops[i].stream);
    p.lane[i] = static_cast<int>(it - p.streams.begin());
    p.lane_last[static_cast<std::size_t>(p.lane[i])] = static_cast<int>(i);
  }

  // Dependencies, in program order.
  std::vector<int> writer(n_tensors, -1);                 // last writer in this step
  std::vector<std::vector<int>> side_touch(n_tensors);    // side-lane ops that read or wrote it
  for (std::size_t i = 0; i < n_ops; ++i) {
    const Op& op = g.ops[i];
    const int lane = p.lane[i];
    for (int id : op.inputs) {
      const int w = writer[static_cast<std::size_t>(id)];
      if (w >= 0 && p.lane[static_cast<std::size_t>(w)] != lane && p.lane[static_cast<std::size_t>(w)] != 0)
        add_unique(p.waits[i], w);
    }
    for (int id : op.outputs)
      for (int j : side_touch[static_cast<std::size_t>(id)])
        if (p.lane[static_cast<std::size_t>(j)] != lane) add_unique(p.waits[i], j);
    for (int id : op.outputs) writer[static_cast<std::size_t>(id)] = static_cast<int>(i);
    if (lane != 0) {
      for (int id : op.inputs) add_unique(side_touch[static_cast<std::size_t>(id)], static_cast<int>(i));
      for (int id : op.outputs) add_unique(side_touch[static_cast<std::size_t>(id)], static_cast<int>(i));
    }
    std::sort(p.waits[i].begin(), p.waits[i].end());
  }

  // Frees. last_use() may already say -1 for side-lane and host tensors; the plan does not
  // rely on it.
  const std::vector<int> last = last_use(g);
  p.free_after.assign(n_tensors, -1);
  p.end_of_step.assign(n_tensors, 0);
  for (const Tensor& t : g.tensors) {
    const auto id = static_cast<std::size_t>(t.id);
    if (t.on_host() || is_persistent(t)) continue;  // host memory / live throughout
    const int l = last[id];
    if (l < 0 || p.lane[static_cast<std::size_t>(l)] != 0) {
      p.end_of_step[id] = 1;
      continue;
    }
    p.free_after[id] = l;
    auto& w = p.waits[static_cast<std::size_t>(l)];
    for (int j : side_touch[id])
      if (!std::binary_search(w.begin(), w.end(), j)) add_unique(p.after[static_cast<std::size_t>(l)], j);
  }
  return p;
}

}  // namespace perfsim::cuda
