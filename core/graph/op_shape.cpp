// op_shape_text (op_shape.hpp).
#include "core/graph/op_shape.hpp"

#include <fmt/format.h>

#include "core/graph/op_kind.hpp"

namespace perfsim {

namespace {

std::string join_dims(const std::vector<int64_t>& dims) {
  std::string out;
  for (auto d : dims) out += (out.empty() ? "" : "×") + std::to_string(d);
  return out;
}

}  // namespace

std::string op_shape_text(const Op& op, const Graph& g) {
  const OpAttrs& a = op.attrs;
  if (op.kind == OpKind::gemm) {
    std::string s = fmt::format("{}×{}×{}", a.m, a.n, a.k);
    return a.batch > 1 ? fmt::format("{}×({})", a.batch, s) : s;
  }
  // A convolution or a pool: its input image, window and output channels.
  if ((class_of(op.kind) == OpClass::conv || op.kind == OpKind::maxpool || op.kind == OpKind::maxpool_bwd ||
       op.kind == OpKind::avgpool || op.kind == OpKind::avgpool_bwd) &&
      a.conv.height > 0) {
    const ConvGeometry& c = a.conv;
    std::string s = fmt::format("n{} {}×{}×{} {}×{}/{} → {}×{}×{}", a.batch, c.height, c.width, c.channels,
                                c.kernel_h, c.kernel_w, c.stride, c.out_h(), c.out_w(), c.filters);
    if (c.groups > 1) s += fmt::format(" g{}", c.groups);
    return s;
  }
  // A paged cache (paged_kv, a serving engine's step) adds its rows per page.
  const std::string paged = reads_kv_pages(op.kind) ? fmt::format(" pages of {}", a.kv_block) : "";
  if (class_of(op.kind) == OpClass::attention && a.heads > 0)
    return fmt::format("b{} h{}/{} q{} kv{} d{}{}", a.batch, a.heads, a.kv_heads, a.seq_q, a.seq_kv,
                       a.head_dim, paged);
  if (op.kind == OpKind::paged_kv_append || op.kind == OpKind::varlen_kv_append)
    return fmt::format("b{} q{} at {}{}", a.batch, a.seq_q, a.position, paged);
  if (!op.outputs.empty()) {
    std::string s = join_dims(g.tensor(op.outputs.front()).shape);
    if (op.outputs.size() > 1 && op.kind == OpKind::adamw)
      s += fmt::format(" (+{} more)", op.outputs.size() - 1);
    return s;
  }
  return "";
}

}  // namespace perfsim
