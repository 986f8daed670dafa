// recompute pass (full activation checkpointing per layer, as Megatron's "full" recompute):
// before each layer's first backward op, the layer's forward ops run again into fresh
// tensors and that layer's backward reads those. Only the layer input stays saved across
// layers; the original forward activations now die in the forward pass. A fused add+norm at
// a layer boundary (fusion pass) is split at the checkpoint: the next layer recomputes its norm
// from the saved layer input, and the layer that owns the add reruns just the add.
#include <unordered_map>
#include <vector>

#include "core/graph/rewrite.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

namespace {

bool writes_only_activations(const Graph& g, const Op& op) {
  for (int id : op.outputs)
    if (g.tensor(id).role != TensorRole::activation) return false;
  return true;
}

bool is_add_norm(const Op& op) {
  return op.kind == OpKind::add_rmsnorm || op.kind == OpKind::add_layernorm;
}

// The norm half of a fused add+norm {a, b, gamma (, beta)} -> {sum, y}: {sum, gamma (, beta)} -> {y}.
Op norm_half(const Op& f) {
  Op n = f;
  n.kind = f.kind == OpKind::add_rmsnorm ? OpKind::rmsnorm : OpKind::layernorm;
  n.name = f.attrs.fused.size() == 2 ? f.attrs.fused[1] : f.name;
  n.inputs = {f.outputs.at(0)};
  n.inputs.insert(n.inputs.end(), f.inputs.begin() + 2, f.inputs.end());
  n.outputs = {f.outputs.at(1)};
  n.attrs.fused.clear();
  return n;
}

// The add half of a fused add+norm: {a, b} -> {sum}.
Op add_half(const Op& f) {
  Op a = f;
  a.kind = OpKind::residual_add;
  a.name = f.attrs.fused.size() == 2 ? f.attrs.fused[0] : f.name;
  a.inputs = {f.inputs.at(0), f.inputs.at(1)};
  a.outputs = {f.outputs.at(0)};
  a.attrs.fused.clear();
  a.attrs.elements = f.attrs.rows * f.attrs.cols;
  return a;
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

  // Which op writes each tensor, and which layers' forward/backward ops read it.
  std::vector<int> writer(g.tensors.size(), -1);
  std::vector<std::vector<int>> reader_layers(g.tensors.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    for (int id : op.outputs) writer[static_cast<std::size_t>(id)] = static_cast<int>(i);
    if (op.stage == Stage::forward || op.stage == Stage::backward)
      for (int id : op.inputs) reader_layers[static_cast<std::size_t>(id)].push_back(op.layer);
  }
  auto read_by_layer = [&](int tensor, int layer) {
    for (int l : reader_layers[static_cast<std::size_t>(tensor)])
      if (l == layer) return true;
    return false;
  };

  std::vector<std::vector<Op>> insert_before(g.ops.size());
  for (std::size_t l = 0; l < built; ++l) {
    if (fwd[l].empty() || bwd[l].empty()) continue;
    const int layer = static_cast<int>(l);
    // Rerun the whole layer forward in order into fresh tensors, as checkpointing frameworks
    // do (outputs the backward does not read are freed right after they are written).
    std::vector<Op> plan;
    // A norm output this layer reads from another layer's fused add+norm lies past the
    // checkpoint (the layer input): recompute the norm from that input.
    std::vector<bool> split(g.tensors.size(), false);
    for (std::size_t i : fwd[l])
      for (int id : g.ops[i].inputs) {
        const int w = writer[static_cast<std::size_t>(id)];
        if (w < 0 || split[static_cast<std::size_t>(id)]) continue;
        const Op& f = g.ops[static_cast<std::size_t>(w)];
        if (is_add_norm(f) && f.layer != layer && f.stage == Stage::forward &&
            f.outputs.at(1) == id) {
          split[static_cast<std::size_t>(id)] = true;
          plan.push_back(norm_half(f));
        }
      }
    for (std::size_t i : fwd[l]) {
      const Op& op = g.ops[i];
      if (!writes_only_activations(g, op)) continue;
      // This layer's own fused add+norm whose norm output only the next layer reads: the
      // recomputation needs just the add.
      plan.push_back(is_add_norm(op) && !read_by_layer(op.outputs.at(1), layer) ? add_half(op)
                                                                                 : op);
    }
    std::unordered_map<int, int> fresh;  // original tensor -> recomputed tensor
    std::vector<Op> clones;
    for (Op& c : plan) {
      c.layer = layer;
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
