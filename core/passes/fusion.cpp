// fusion pass: a residual_add whose sum is first read by a norm becomes one add_rmsnorm /
// add_layernorm op {a, b, gamma (, beta)} -> {sum, y}, as a compiler would fuse them: one
// read of the two branches instead of a write and re-read of the sum.
#include <vector>

#include "core/graph/rewrite.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

void apply_fusion(Graph& g) {
  const auto readers = readers_of(g);
  std::vector<bool> drop(g.ops.size(), false);
  bool changed = false;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    Op& r = g.ops[i];
    if (r.kind != OpKind::residual_add || drop[i]) continue;
    const int sum = r.outputs.at(0);
    int next = -1;
    for (int j : readers[static_cast<std::size_t>(sum)])
      if (j > static_cast<int>(i)) {
        next = j;
        break;
      }
    if (next < 0) continue;
    const Op& n = g.ops[static_cast<std::size_t>(next)];
    const bool is_norm = n.kind == OpKind::rmsnorm || n.kind == OpKind::layernorm;
    // Sampled builds: a per-layer add (count L/built) feeding the final norm (count 1) stands
    // for ops of which only one is fused, so only equal counts are merged.
    if (!is_norm || n.inputs.at(0) != sum || n.count != r.count || n.stage != r.stage ||
        n.recomputed != r.recomputed)
      continue;
    Op f = r;
    f.kind = n.kind == OpKind::rmsnorm ? OpKind::add_rmsnorm : OpKind::add_layernorm;
    f.name = r.name + "+" + n.name;
    f.inputs = {r.inputs.at(0), r.inputs.at(1)};
    f.inputs.insert(f.inputs.end(), n.inputs.begin() + 1, n.inputs.end());
    f.outputs = {sum, n.outputs.at(0)};
    f.attrs = n.attrs;
    f.attrs.fused = {r.name, n.name};
    f.dtype = n.dtype;
    r = std::move(f);
    drop[static_cast<std::size_t>(next)] = true;
    changed = true;
  }
  if (!changed) return;
  std::vector<Op> ops;
  ops.reserve(g.ops.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (!drop[i]) ops.push_back(std::move(g.ops[i]));
  g.ops = std::move(ops);
  renumber_ops(g);
  assign_activation_counts(g);
}

}  // namespace perfsim::passes
