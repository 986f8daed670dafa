// fused_optimizer pass: the per-tensor, multi-pass AdamW ops become one multi-tensor op that
// streams every parameter group once (as torch's fused AdamW and apex FusedAdam do).
#include <vector>

#include "core/graph/rewrite.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

void apply_fused_optimizer(Graph& g) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == OpKind::adamw) idx.push_back(i);
  if (idx.empty()) return;

  Op f = g.ops[idx.front()];
  f.name = "fused_adamw";
  f.inputs.clear();
  f.outputs.clear();
  f.layer = -1;
  f.attrs.passes = 1;
  // Per-layer groups stand for L/built tensors, the others for one. The single op's count is
  // the element-weighted mean of its groups' counts, so flops/bytes × count cover the model.
  double elements = 0, weighted = 0;
  for (std::size_t i : idx) {
    const Op& o = g.ops[i];
    f.inputs.insert(f.inputs.end(), o.inputs.begin(), o.inputs.end());
    f.outputs.insert(f.outputs.end(), o.outputs.begin(), o.outputs.end());
    elements += static_cast<double>(o.attrs.elements);
    weighted += static_cast<double>(o.attrs.elements) * o.count;
  }
  f.attrs.elements = static_cast<int64_t>(elements);
  f.count = elements > 0 ? weighted / elements : 1.0;

  std::vector<Op> ops;
  ops.reserve(g.ops.size() - idx.size() + 1);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    if (i == idx.front()) ops.push_back(f);
    else if (g.ops[i].kind != OpKind::adamw) ops.push_back(std::move(g.ops[i]));
  }
  g.ops = std::move(ops);
  renumber_ops(g);
}

}  // namespace perfsim::passes
