// flash_attention pass: each materialized attn_scores -> attn_softmax -> attn_context chain
// becomes one flash_attention op {Q, K, V} -> {O, LSE}, and in training the three backward
// ops become one flash_attention_bwd {Q, K, V, O, dO, LSE} -> {dQ, dK, dV}. The score and
// probability tensors (and their gradients) disappear from the graph. A chain that selective
// recompute reran in backward from the forward's own Q, K and V fuses into nothing: the
// backward reads the forward's O and LSE, as it does when flash attention comes first.
#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/graph/rewrite.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

namespace {

// "layer0.attn.softmax" -> "layer0.attn.flash_attention" (keeps any ".recompute" suffix).
std::string renamed(const std::string& name, const std::string& from, const std::string& to) {
  const auto pos = name.find(from);
  if (pos == std::string::npos) return name + "." + to;
  return name.substr(0, pos) + to + name.substr(pos + from.size());
}

struct Chain {
  int scores = -1, softmax = -1, context = -1;  // op indices
  int o = -1, lse = -1;                         // tensor ids
};

// The op index that reads `tensor` with kind `k`, or -1.
int reader_of_kind(const Graph& g, const std::vector<std::vector<int>>& readers, int tensor,
                   OpKind k) {
  for (int i : readers[static_cast<std::size_t>(tensor)])
    if (g.ops[static_cast<std::size_t>(i)].kind == k) return i;
  return -1;
}

}  // namespace

void apply_flash_attention(Graph& g) {
  const auto readers = readers_of(g);
  std::vector<int> writer(g.tensors.size(), -1);
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    for (int id : g.ops[i].outputs) writer[static_cast<std::size_t>(id)] = static_cast<int>(i);

  std::vector<bool> drop(g.ops.size(), false);
  std::map<int, Op> replace;       // op index -> the fused op taking its place
  std::map<int, Chain> by_probs;   // probability tensor id -> its forward chain
  std::map<std::array<int, 3>, Chain> by_qkv;  // the forward chains by their Q, K, V

  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& sm = g.ops[i];
    if (sm.kind != OpKind::attn_softmax) continue;
    Chain c;
    c.softmax = static_cast<int>(i);
    c.scores = writer[static_cast<std::size_t>(sm.inputs.at(0))];
    c.context = reader_of_kind(g, readers, sm.outputs.at(0), OpKind::attn_context);
    if (c.scores < 0 || c.context < 0 ||
        g.ops[static_cast<std::size_t>(c.scores)].kind != OpKind::attn_scores)
      continue;
    const Op& sc = g.ops[static_cast<std::size_t>(c.scores)];
    const Op& cx = g.ops[static_cast<std::size_t>(c.context)];
    const OpAttrs& a = sc.attrs;
    const std::array<int, 3> qkv{sc.inputs.at(0), sc.inputs.at(1), cx.inputs.at(1)};
    if (sm.recomputed) {
      if (const auto fwd = by_qkv.find(qkv); fwd != by_qkv.end()) {
        drop[static_cast<std::size_t>(c.scores)] = drop[i] = drop[static_cast<std::size_t>(c.context)] = true;
        by_probs[sm.outputs.at(0)] = fwd->second;
        continue;
      }
    }
    c.o = cx.outputs.at(0);
    Tensor lse;
    lse.name = renamed(sm.name, "softmax", "flash_attention") + ".lse";
    lse.shape = {a.batch, a.heads, a.seq_q};
    lse.dtype = DType::fp32;
    lse.role = TensorRole::activation;
    c.lse = g.add_tensor(std::move(lse));

    Op f = sc;  // stage, layer, count, recomputed, dtype of the chain
    f.name = renamed(sm.name, "softmax", "flash_attention");
    f.kind = OpKind::flash_attention;
    f.inputs = {sc.inputs.at(0), sc.inputs.at(1), cx.inputs.at(1)};
    f.outputs = {c.o, c.lse};
    // V is written before the context op reads it, so the fused op sits there.
    replace[c.context] = std::move(f);
    drop[static_cast<std::size_t>(c.scores)] = drop[i] = true;
    by_probs[sm.outputs.at(0)] = c;
    if (!sm.recomputed) by_qkv[qkv] = c;
  }

  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& cb = g.ops[i];  // attn_context_bwd {dO, P, V} -> {dP, dV}
    if (cb.kind != OpKind::attn_context_bwd) continue;
    const auto it = by_probs.find(cb.inputs.at(1));
    if (it == by_probs.end()) continue;
    const int sb = reader_of_kind(g, readers, cb.outputs.at(0), OpKind::attn_softmax_bwd);
    if (sb < 0) continue;
    const int ds = g.ops[static_cast<std::size_t>(sb)].outputs.at(0);
    const int kb = reader_of_kind(g, readers, ds, OpKind::attn_scores_bwd);
    if (kb < 0) continue;
    const Op& sbw = g.ops[static_cast<std::size_t>(kb)];  // {dS, Q, K} -> {dQ, dK}
    Op f = cb;
    f.name = renamed(g.ops[static_cast<std::size_t>(sb)].name, "softmax", "flash_attention");
    f.kind = OpKind::flash_attention_bwd;
    f.inputs = {sbw.inputs.at(1), sbw.inputs.at(2), cb.inputs.at(2), it->second.o, cb.inputs.at(0),
                it->second.lse};
    f.outputs = {sbw.outputs.at(0), sbw.outputs.at(1), cb.outputs.at(1)};
    replace[static_cast<int>(i)] = std::move(f);
    drop[static_cast<std::size_t>(sb)] = drop[static_cast<std::size_t>(kb)] = true;
  }

  if (replace.empty() && std::find(drop.begin(), drop.end(), true) == drop.end()) return;
  std::vector<Op> ops;
  ops.reserve(g.ops.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const auto r = replace.find(static_cast<int>(i));
    if (r != replace.end()) ops.push_back(std::move(r->second));
    else if (!drop[i]) ops.push_back(std::move(g.ops[i]));
  }
  g.ops = std::move(ops);
  renumber_ops(g);
  remove_unused_tensors(g);
  assign_activation_counts(g);
}

}  // namespace perfsim::passes
