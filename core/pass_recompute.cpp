// recompute pass (full activation checkpointing per layer, as Megatron's "full" recompute):
// before each layer's first backward op, the layer's forward ops run again into fresh
// tensors and that layer's backward reads those. Only the layer input stays saved across
// layers; the original forward activations now die in the forward pass.
#include <unordered_map>
#include <vector>

#include "core/graph_rewrite.hpp"
#include "core/pass_impl.hpp"

namespace perfsim::passes {

namespace {

bool writes_only_activations(const Graph& g, const Op& op) {
  for (int id : op.outputs)
    if (g.tensor(id).role != TensorRole::activation) return false;
  return true;
}

}  // namespace

void apply_recompute(Graph& g) {
  if (!is_training_graph(g)) return;  // nothing is saved for a backward pass
  for (const Op& op : g.ops)
    if (op.recomputed) return;  // already checkpointed

  const auto built = static_cast<std::size_t>(g.layers_built);
  std::vector<std::vector<std::size_t>> fwd(built), bwd(built);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.layer < 0 || static_cast<std::size_t>(op.layer) >= built) continue;
    if (op.stage == Stage::forward) fwd[static_cast<std::size_t>(op.layer)].push_back(i);
    if (op.stage == Stage::backward) bwd[static_cast<std::size_t>(op.layer)].push_back(i);
  }

  std::vector<std::vector<Op>> insert_before(g.ops.size());
  for (std::size_t l = 0; l < built; ++l) {
    if (fwd[l].empty() || bwd[l].empty()) continue;
    // Rerun the whole layer forward in order into fresh tensors, as checkpointing frameworks
    // do (outputs the backward does not read are freed right after they are written).
    std::unordered_map<int, int> fresh;  // original tensor -> recomputed tensor
    std::vector<Op> clones;
    for (std::size_t i : fwd[l]) {
      if (!writes_only_activations(g, g.ops[i])) continue;
      Op c = g.ops[i];
      c.name += ".recompute";
      c.stage = Stage::backward;
      c.recomputed = true;
      for (int& id : c.inputs) {
        const auto it = fresh.find(id);
        if (it != fresh.end()) id = it->second;
      }
      for (int& id : c.outputs) {
        Tensor t = g.tensor(id);
        t.name += ".recomputed";
        t.count = 1;
        const int nid = g.add_tensor(std::move(t));
        fresh.emplace(id, nid);
        id = nid;
      }
      clones.push_back(std::move(c));
    }
    for (std::size_t i : bwd[l])
      for (int& id : g.ops[i].inputs) {
        const auto it = fresh.find(id);
        if (it != fresh.end()) id = it->second;
      }
    insert_before[bwd[l].front()] = std::move(clones);
  }

  std::vector<Op> ops;
  ops.reserve(g.ops.size() * 2);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    for (Op& c : insert_before[i]) ops.push_back(std::move(c));
    ops.push_back(std::move(g.ops[i]));
  }
  g.ops = std::move(ops);
  renumber_ops(g);
  assign_activation_counts(g);
}

}  // namespace perfsim::passes
