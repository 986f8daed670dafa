// Graph-editing helpers shared by builders and passes.
#include "core/graph/rewrite.hpp"

#include <cstddef>

namespace perfsim {

void assign_activation_counts(Graph& g) {
  const double scale = g.layer_scale();
  std::vector<bool> from_layer_forward(g.tensors.size(), false);
  std::vector<bool> read_in_backward(g.tensors.size(), false);
  for (const Op& op : g.ops) {
    if (op.stage == Stage::forward && op.layer >= 0 && !op.recomputed)
      for (int id : op.outputs) from_layer_forward[static_cast<std::size_t>(id)] = true;
    if (op.stage == Stage::backward)
      for (int id : op.inputs) read_in_backward[static_cast<std::size_t>(id)] = true;
  }
  for (Tensor& t : g.tensors) {
    if (t.role != TensorRole::activation) continue;
    const auto i = static_cast<std::size_t>(t.id);
    t.count = from_layer_forward[i] && read_in_backward[i] ? scale : 1.0;
  }
}

void remove_unused_tensors(Graph& g) {
  std::vector<bool> used(g.tensors.size(), false);
  for (const Op& op : g.ops) {
    for (int id : op.inputs) used[static_cast<std::size_t>(id)] = true;
    for (int id : op.outputs) used[static_cast<std::size_t>(id)] = true;
  }
  std::vector<int> new_id(g.tensors.size(), -1);
  std::vector<Tensor> kept;
  kept.reserve(g.tensors.size());
  for (Tensor& t : g.tensors) {
    if (!used[static_cast<std::size_t>(t.id)]) continue;
    new_id[static_cast<std::size_t>(t.id)] = static_cast<int>(kept.size());
    t.id = static_cast<int>(kept.size());
    kept.push_back(std::move(t));
  }
  g.tensors = std::move(kept);
  for (Op& op : g.ops) {
    for (int& id : op.inputs) id = new_id[static_cast<std::size_t>(id)];
    for (int& id : op.outputs) id = new_id[static_cast<std::size_t>(id)];
  }
}

void renumber_ops(Graph& g) {
  for (std::size_t i = 0; i < g.ops.size(); ++i) g.ops[i].id = static_cast<int>(i);
}

bool is_training_graph(const Graph& g) {
  for (const Op& op : g.ops)
    if (op.stage == Stage::optimizer) return true;
  return false;
}

std::vector<std::vector<int>> readers_of(const Graph& g) {
  std::vector<std::vector<int>> r(g.tensors.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    for (int id : g.ops[i].inputs) {
      auto& list = r[static_cast<std::size_t>(id)];
      if (list.empty() || list.back() != static_cast<int>(i)) list.push_back(static_cast<int>(i));
    }
  return r;
}

}  // namespace perfsim
