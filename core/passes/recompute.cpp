// recompute pass. Full (activation checkpointing per layer, as Megatron's "full" recompute):
// before each layer's first backward op, the layer's forward ops run again into fresh
// tensors and that layer's backward reads those. Only the layer input stays saved across
// layers; the original forward activations now die in the forward pass. A fused add+norm at
// a layer boundary (fusion pass) is split at the checkpoint: the next layer recomputes its norm
// from the saved layer input, and the layer that owns the add reruns just the add.
// Selective (Megatron's "selective" recompute, Korthikanti et al. 2022, §5): only the attention
// core (scores, softmax, context) reruns, before the first backward op reading the softmax
// output; everything else stays saved.
#include <string>
#include <string_view>
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

bool is_attention_core(OpKind k) {
  return k == OpKind::attn_scores || k == OpKind::attn_softmax || k == OpKind::attn_context;
}

constexpr std::string_view clone_suffix = ".recompute";

// Op `op` rerun in backward: fresh output tensors, inputs read through `fresh` (original tensor
// -> recomputed tensor), which learns the outputs.
Op recompute_clone(Graph& g, Op c, std::unordered_map<int, int>& fresh) {
  c.name += clone_suffix;
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
  return c;
}

// Puts each list of `insert_before` ahead of the op of its index.
void insert_ops(Graph& g, std::vector<std::vector<Op>>& insert_before) {
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

// Removes selective recompute's clones; their readers read the forward's tensors again.
void drop_recomputed(Graph& g) {
  std::unordered_map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (!g.ops[i].recomputed) by_name.emplace(g.ops[i].name, i);
  std::unordered_map<int, int> original;  // recomputed tensor -> forward tensor
  for (const Op& c : g.ops) {
    if (!c.recomputed) continue;
    const auto it = by_name.find(c.name.substr(0, c.name.size() - clone_suffix.size()));
    if (it == by_name.end()) continue;
    const Op& f = g.ops[it->second];
    for (std::size_t k = 0; k < c.outputs.size() && k < f.outputs.size(); ++k)
      original.emplace(c.outputs[k], f.outputs[k]);
  }
  std::vector<Op> ops;
  ops.reserve(g.ops.size());
  for (Op& op : g.ops) {
    if (op.recomputed) continue;
    for (int& id : op.inputs)
      if (const auto it = original.find(id); it != original.end()) id = it->second;
    ops.push_back(std::move(op));
  }
  g.ops = std::move(ops);
  renumber_ops(g);
  remove_unused_tensors(g);
  assign_activation_counts(g);
}

}  // namespace

void apply_selective_recompute(Graph& g) {
  if (!is_training_graph(g)) return;  // nothing is saved for a backward pass
  for (const Op& op : g.ops)
    if (op.recomputed) return;  // full recompute reruns the attention core already
  const auto readers = readers_of(g);
  std::vector<int> writer(g.tensors.size(), -1);
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    for (int id : g.ops[i].outputs) writer[static_cast<std::size_t>(id)] = static_cast<int>(i);

  // Each materialized chain scores -> softmax -> context whose probabilities P the backward
  // reads. Flash attention has none: it saves only O and the log-sum-exp, and its backward
  // recomputes the scores tile by tile already, so there is nothing to drop.
  std::vector<std::vector<Op>> insert_before(g.ops.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& sm = g.ops[i];
    if (sm.kind != OpKind::attn_softmax || sm.stage != Stage::forward || sm.layer < 0) continue;
    const int sc = writer[static_cast<std::size_t>(sm.inputs.at(0))];
    if (sc < 0 || g.ops[static_cast<std::size_t>(sc)].kind != OpKind::attn_scores) continue;
    const int probs = sm.outputs.at(0);
    int cx = -1;
    std::vector<int> backward;
    for (int r : readers[static_cast<std::size_t>(probs)]) {
      const Op& op = g.ops[static_cast<std::size_t>(r)];
      if (op.kind == OpKind::attn_context && op.stage == Stage::forward) cx = r;
      else if (op.stage == Stage::backward) backward.push_back(r);
    }
    if (cx < 0 || backward.empty()) continue;
    // All three rerun, as Megatron's checkpoint of the core attention does: the context's
    // rerun is part of the FLOPs the method adds (4·b·s²·h a layer), though the backward
    // reads the saved context (the o_proj's input) rather than the rerun one.
    std::unordered_map<int, int> fresh;
    std::vector<Op>& clones = insert_before[static_cast<std::size_t>(backward.front())];
    for (const int k : {sc, static_cast<int>(i), cx})
      clones.push_back(recompute_clone(g, g.ops[static_cast<std::size_t>(k)], fresh));
    for (int r : backward)
      for (int& id : g.ops[static_cast<std::size_t>(r)].inputs)
        if (id == probs) id = fresh.at(probs);
  }
  insert_ops(g, insert_before);
}

void apply_recompute(Graph& g) {
  if (!is_training_graph(g)) return;  // nothing is saved for a backward pass
  bool recomputed = false, selective = true;
  for (const Op& op : g.ops) {
    if (!op.recomputed) continue;
    recomputed = true;
    selective = selective && is_attention_core(op.kind);
  }
  if (recomputed && !selective) return;  // already checkpointed
  // Full recompute after selective: the whole layer reruns, the attention core with it.
  if (recomputed) drop_recomputed(g);

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
      clones.push_back(recompute_clone(g, std::move(c), fresh));
    }
    for (std::size_t i : bwd[l])
      for (int& id : g.ops[i].inputs) {
        const auto it = fresh.find(id);
        if (it != fresh.end()) id = it->second;
      }
    insert_before[bwd[l].front()] = std::move(clones);
  }
  insert_ops(g, insert_before);
}

}  // namespace perfsim::passes
