// The op table (one row per kind) and what is read from it.
#include "core/graph/op_kind.hpp"

#include <iterator>

namespace perfsim {

namespace {

// The op table: one row per kind, in declaration order. class: the report group efficiency
// tables are keyed by; family: the kind whose calibration curves and host dispatch it shares
// (calibration_family); pages: whether it reads a page pool of attrs.kv_block rows per page;
// paged: what the paged_kv pass makes of it (itself: nothing). signature: its operands, each a
// name with ":i32" or ":f32" when its type is fixed and "?" when it may be left out, "..." for
// operand lists of any length.
struct KindRow {
  OpKind kind;
  std::string_view name;
  OpClass cls;
  OpKind family;
  bool pages;
  OpKind paged;
  std::string_view signature;
};

using K = OpKind;
using C = OpClass;

// Joining two attention blocks' outputs (attn_merge) is element-wise, memory-bound like an add.
// Routing is a row-wise top-k and softmax over E logits, pointwise-like in cost; the other
// expert ops move rows between token and expert order (combine also scales them) in kernels
// that stream device memory as element-wise kernels do, not on the copy engines the memory class
// is fitted to (copies to and from the host, memsets).
constexpr KindRow kind_rows[] = {
    {K::gemm, "gemm", C::gemm, K::gemm, false, K::gemm, "A B C? -> C"},
    {K::attn_scores, "attn_scores", C::attention, K::attn_scores, false, K::attn_scores, "Q K -> S"},
    {K::attn_softmax, "attn_softmax", C::attention, K::attn_softmax, false, K::attn_softmax, "S -> P"},
    {K::attn_context, "attn_context", C::attention, K::attn_context, false, K::attn_context, "P V -> O"},
    {K::attn_context_bwd, "attn_context_bwd", C::attention, K::attn_context_bwd, false, K::attn_context_bwd,
     "dO P V -> dP dV"},
    {K::attn_softmax_bwd, "attn_softmax_bwd", C::attention, K::attn_softmax_bwd, false, K::attn_softmax_bwd,
     "P dP -> dS"},
    {K::attn_scores_bwd, "attn_scores_bwd", C::attention, K::attn_scores_bwd, false, K::attn_scores_bwd,
     "dS Q K -> dQ dK"},
    {K::flash_attention, "flash_attention", C::attention, K::flash_attention, false, K::paged_flash_attention,
     "Q K V -> O LSE:f32"},
    {K::paged_flash_attention, "paged_flash_attention", C::attention, K::flash_attention, true,
     K::paged_flash_attention, "Q K_pages V_pages table:i32 -> O LSE:f32"},
    {K::varlen_flash_attention, "varlen_flash_attention", C::attention, K::flash_attention, true,
     K::varlen_flash_attention, "Q K_pages V_pages table:i32 query_start:i32 kv_len:i32 -> O LSE:f32"},
    {K::flash_attention_bwd, "flash_attention_bwd", C::attention, K::flash_attention_bwd, false,
     K::flash_attention_bwd, "Q K V O dO LSE:f32 -> dQ dK dV"},
    {K::attn_merge, "attn_merge", C::pointwise, K::attn_merge, false, K::attn_merge,
     "O_a LSE_a:f32 O_b LSE_b:f32 -> O LSE:f32"},
    {K::layernorm, "layernorm", C::norm, K::layernorm, false, K::layernorm, "x gamma beta -> y"},
    {K::layernorm_bwd, "layernorm_bwd", C::norm, K::layernorm_bwd, false, K::layernorm_bwd,
     "x gamma dy -> dx dgamma dbeta"},
    {K::rmsnorm, "rmsnorm", C::norm, K::rmsnorm, false, K::rmsnorm, "x gamma -> y"},
    {K::rmsnorm_bwd, "rmsnorm_bwd", C::norm, K::rmsnorm_bwd, false, K::rmsnorm_bwd, "x gamma dy -> dx dgamma"},
    {K::gelu, "gelu", C::pointwise, K::gelu, false, K::gelu, "x -> y"},
    {K::gelu_bwd, "gelu_bwd", C::pointwise, K::gelu_bwd, false, K::gelu_bwd, "x dy -> dx"},
    {K::silu_mul, "silu_mul", C::pointwise, K::silu_mul, false, K::silu_mul, "gate up -> y"},
    {K::silu_mul_bwd, "silu_mul_bwd", C::pointwise, K::silu_mul_bwd, false, K::silu_mul_bwd,
     "gate up dy -> dgate dup"},
    {K::rope, "rope", C::pointwise, K::rope, false, K::rope, "x -> y"},
    {K::varlen_rope, "varlen_rope", C::pointwise, K::rope, false, K::varlen_rope, "x positions:i32 -> y"},
    {K::rope_bwd, "rope_bwd", C::pointwise, K::rope_bwd, false, K::rope_bwd, "dy -> dx"},
    {K::residual_add, "residual_add", C::pointwise, K::residual_add, false, K::residual_add, "a b -> out"},
    {K::embedding, "embedding", C::embedding, K::embedding, false, K::embedding, "ids:i32 table positions? -> x"},
    {K::embedding_bwd, "embedding_bwd", C::embedding, K::embedding_bwd, false, K::embedding_bwd,
     "ids:i32 dx dtable_in? dpositions_in? -> dtable dpositions?"},
    {K::cross_entropy, "cross_entropy", C::loss, K::cross_entropy, false, K::cross_entropy,
     "logits targets:i32 -> loss:f32 dlogits?"},
    {K::adamw, "adamw", C::optimizer, K::adamw, false, K::adamw, "param grad m v ... -> param m v ..."},
    {K::add_rmsnorm, "add_rmsnorm", C::norm, K::add_rmsnorm, false, K::add_rmsnorm, "a b gamma -> sum y"},
    {K::add_layernorm, "add_layernorm", C::norm, K::add_layernorm, false, K::add_layernorm,
     "a b gamma beta -> sum y"},
    {K::kv_append, "kv_append", C::memory, K::kv_append, false, K::paged_kv_append, "k_new cache -> cache"},
    {K::paged_kv_append, "paged_kv_append", C::memory, K::kv_append, true, K::paged_kv_append,
     "k_new pages table:i32 -> pages"},
    {K::varlen_kv_append, "varlen_kv_append", C::memory, K::kv_append, true, K::varlen_kv_append,
     "k_new pages slots:i32 -> pages"},
    {K::slice_last_token, "slice_last_token", C::memory, K::slice_last_token, false, K::slice_last_token, "x -> y"},
    {K::varlen_slice_last_token, "varlen_slice_last_token", C::memory, K::slice_last_token, false,
     K::varlen_slice_last_token, "x rows:i32 -> y"},
    {K::moe_route, "moe_route", C::pointwise, K::moe_route, false, K::moe_route,
     "logits -> weights:f32 experts:i32 slots:i32"},
    {K::moe_route_bwd, "moe_route_bwd", C::pointwise, K::moe_route_bwd, false, K::moe_route_bwd,
     "logits experts:i32 dweights:f32 -> dlogits:f32"},
    {K::moe_dispatch, "moe_dispatch", C::pointwise, K::moe_dispatch, false, K::moe_dispatch,
     "x experts:i32 slots:i32 -> xe"},
    {K::moe_dispatch_bwd, "moe_dispatch_bwd", C::pointwise, K::moe_dispatch_bwd, false, K::moe_dispatch_bwd,
     "dxe experts:i32 slots:i32 -> dx"},
    {K::moe_combine, "moe_combine", C::pointwise, K::moe_combine, false, K::moe_combine,
     "ye experts:i32 slots:i32 weights:f32 -> y"},
    {K::moe_combine_bwd, "moe_combine_bwd", C::pointwise, K::moe_combine_bwd, false, K::moe_combine_bwd,
     "dy ye experts:i32 slots:i32 weights:f32 -> dye dweights:f32"},
    {K::conv2d, "conv2d", C::conv, K::conv2d, false, K::conv2d, "x w bias? -> y"},
    {K::conv2d_dgrad, "conv2d_dgrad", C::conv, K::conv2d_dgrad, false, K::conv2d_dgrad, "dy w -> dx"},
    {K::conv2d_wgrad, "conv2d_wgrad", C::conv, K::conv2d_wgrad, false, K::conv2d_wgrad, "x dy -> dw"},
    {K::batchnorm, "batchnorm", C::norm, K::batchnorm, false, K::batchnorm, "x gamma beta -> y mean:f32 rstd:f32"},
    {K::batchnorm_infer, "batchnorm_infer", C::norm, K::batchnorm_infer, false, K::batchnorm_infer,
     "x gamma beta mean:f32 var:f32 -> y"},
    {K::batchnorm_bwd, "batchnorm_bwd", C::norm, K::batchnorm_bwd, false, K::batchnorm_bwd,
     "x gamma mean:f32 rstd:f32 dy -> dx dgamma dbeta"},
    {K::relu, "relu", C::pointwise, K::relu, false, K::relu, "x -> y"},
    {K::relu_bwd, "relu_bwd", C::pointwise, K::relu_bwd, false, K::relu_bwd, "y dy -> dx"},
    {K::maxpool, "maxpool", C::pointwise, K::maxpool, false, K::maxpool, "x -> y"},
    {K::maxpool_bwd, "maxpool_bwd", C::pointwise, K::maxpool_bwd, false, K::maxpool_bwd, "x dy -> dx"},
    {K::avgpool, "avgpool", C::pointwise, K::avgpool, false, K::avgpool, "x -> y"},
    {K::avgpool_bwd, "avgpool_bwd", C::pointwise, K::avgpool_bwd, false, K::avgpool_bwd, "dy -> dx"},
    {K::copy, "copy", C::memory, K::copy, false, K::copy, "x -> y"},
    {K::collective, "collective", C::communication, K::collective, false, K::collective, "... -> ..."},
    {K::host, "host", C::host, K::host, false, K::host, "... -> ..."},
};
static_assert(std::size(kind_rows) == op_kind_count, "one row per op kind");

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < std::size(kind_rows); ++i)
    if (kind_rows[i].kind != op_kind_at(i)) return false;
  return true;
}
static_assert(rows_in_order(), "kind_rows follows the OpKind declaration order");

const KindRow& row(OpKind k) { return kind_rows[static_cast<std::size_t>(k)]; }

// One side of a signature ("Q K V", "param grad m v ...").
void parse_operands(std::string_view text, std::vector<OperandSpec>& out, bool& variadic) {
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
    if (word.empty()) continue;
    if (word == "...") {
      variadic = true;
      continue;
    }
    OperandSpec o;
    if (word.back() == '?') o.optional = true, word.remove_suffix(1);
    if (const std::size_t colon = word.find(':'); colon != std::string_view::npos) {
      o.fixed = word.substr(colon + 1) == "i32" ? DType::int32 : DType::fp32;
      word = word.substr(0, colon);
    }
    o.name = word;
    out.push_back(o);
  }
}

OpSignature parse_signature(std::string_view text) {
  OpSignature sig;
  const std::size_t arrow = text.find(" -> ");
  parse_operands(text.substr(0, arrow), sig.inputs, sig.variadic);
  parse_operands(text.substr(arrow + 4), sig.outputs, sig.variadic);
  return sig;
}

}  // namespace

OpClass class_of(OpKind k) { return row(k).cls; }

std::string_view name_of(OpKind k) { return row(k).name; }

std::string_view name_of(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::attention: return "attention";
    case OpClass::conv: return "conv";
    case OpClass::norm: return "norm";
    case OpClass::pointwise: return "pointwise";
    case OpClass::embedding: return "embedding";
    case OpClass::loss: return "loss";
    case OpClass::optimizer: return "optimizer";
    case OpClass::memory: return "memory";
    case OpClass::communication: return "communication";
    case OpClass::host: return "host";
  }
  return "?";
}

std::string_view name_of(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
  }
  return "?";
}

std::optional<OpClass> parse_op_class(std::string_view s) {
  for (OpClass c : all_op_classes)
    if (s == name_of(c)) return c;
  return std::nullopt;
}

std::optional<OpKind> parse_op_kind(std::string_view s) {
  for (const KindRow& r : kind_rows)
    if (s == r.name) return r.kind;
  return std::nullopt;
}

std::optional<Collective> parse_collective(std::string_view s) {
  for (Collective c : all_collectives)
    if (s == name_of(c)) return c;
  return std::nullopt;
}

bool reads_kv_pages(OpKind k) { return row(k).pages; }

bool appends_or_attends_kv(OpKind k) {
  const OpKind family = calibration_family(k);
  return family == OpKind::kv_append || family == OpKind::flash_attention;
}

std::optional<OpKind> paged_kind_of(OpKind k) {
  if (row(k).paged == k) return std::nullopt;
  return row(k).paged;
}

OpKind calibration_family(OpKind k) { return row(k).family; }

std::size_t OpSignature::min_inputs() const {
  std::size_t n = 0;
  for (const OperandSpec& o : inputs) n += o.optional ? 0 : 1;
  return n;
}

std::size_t OpSignature::min_outputs() const {
  std::size_t n = 0;
  for (const OperandSpec& o : outputs) n += o.optional ? 0 : 1;
  return n;
}

const OpSignature& signature_of(OpKind k) {
  static const std::vector<OpSignature> signatures = [] {
    std::vector<OpSignature> all;
    for (const KindRow& r : kind_rows) all.push_back(parse_signature(r.signature));
    return all;
  }();
  return signatures[static_cast<std::size_t>(k)];
}

std::string_view signature_text(OpKind k) { return row(k).signature; }

std::optional<DType> fixed_operand_dtype(OpKind k, bool is_output, std::size_t i) {
  const OpSignature& sig = signature_of(k);
  const std::vector<OperandSpec>& side = is_output ? sig.outputs : sig.inputs;
  if (i < side.size()) return side[i].fixed;
  return std::nullopt;
}

}  // namespace perfsim
