// fusion pass: a residual_add whose sum is first read by a norm becomes one add_rmsnorm /
// add_layernorm op {a, b, gamma (, beta)} -> {sum, y}, as a compiler would fuse them: one
// read of the two branches instead of a write and re-read of the sum. In an image model's
// inference graph, a convolution read only by a batch norm with running statistics (and that
// by a ReLU) is folded into one conv2d with a bias and a ReLU epilogue, as inference engines do
// (TensorRT's conv+BN(+ReLU) fusion): the norm's scale goes into the filters, its shift into the
// bias, and the two element-wise passes over the output disappear.
#include <vector>

#include "core/graph/rewrite.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

namespace {

// The op reading `t` when exactly one op reads it, else −1.
int only_reader(const std::vector<std::vector<int>>& readers, int t) {
  const auto& r = readers[static_cast<std::size_t>(t)];
  return r.size() == 1 ? r.front() : -1;
}

// conv2d → batchnorm_infer (→ relu) into one conv2d {x, w, bias} -> {y} (conv_relu). The
// folded bias is a new [filters] weight; the norm's parameters and running statistics go unused.
bool fold_conv_batchnorm(Graph& g, std::vector<bool>& drop) {
  const auto readers = readers_of(g);
  bool changed = false;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    Op& conv = g.ops[i];
    if (conv.kind != OpKind::conv2d || conv.inputs.size() != 2 || drop[i]) continue;
    const int bn = only_reader(readers, conv.outputs.at(0));
    if (bn < 0) continue;
    const Op& norm = g.ops[static_cast<std::size_t>(bn)];
    if (norm.kind != OpKind::batchnorm_infer || norm.inputs.at(0) != conv.outputs.at(0) || norm.count != conv.count)
      continue;
    int out = norm.outputs.at(0);
    std::vector<std::string> fused = {conv.name, norm.name};
    drop[static_cast<std::size_t>(bn)] = true;
    const int act = only_reader(readers, out);
    if (act >= 0 && g.ops[static_cast<std::size_t>(act)].kind == OpKind::relu &&
        g.ops[static_cast<std::size_t>(act)].count == conv.count) {
      const Op& relu = g.ops[static_cast<std::size_t>(act)];
      out = relu.outputs.at(0);
      fused.push_back(relu.name);
      conv.attrs.conv_relu = true;
      drop[static_cast<std::size_t>(act)] = true;
    }
    Tensor bias = g.tensor(conv.inputs.at(1));  // the filters' role, dtype and count
    bias.name = conv.name + ".folded_bias";
    bias.shape = {conv.attrs.conv.filters};
    conv.inputs.push_back(g.add_tensor(std::move(bias)));
    conv.outputs = {out};
    conv.attrs.fused = fused;
    conv.name += "+bn" + std::string(conv.attrs.conv_relu ? "+relu" : "");
    changed = true;
  }
  return changed;
}

}  // namespace

void apply_fusion(Graph& g) {
  std::vector<bool> drop(g.ops.size(), false);
  bool changed = g.workload.images && fold_conv_batchnorm(g, drop);
  const auto readers = readers_of(g);
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
  if (g.workload.images) {
    remove_unused_tensors(g);  // the folded norms' parameters and statistics
    return;                    // an image model's counts are its blocks' own (core/builders/cnn.cpp)
  }
  assign_activation_counts(g);
}

}  // namespace perfsim::passes
