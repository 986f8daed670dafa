#include "core/graph/op_kind.hpp"

namespace perfsim {

OpClass class_of(OpKind k) {
  switch (k) {
    case OpKind::gemm: return OpClass::gemm;
    case OpKind::attn_scores: case OpKind::attn_softmax: case OpKind::attn_context:
    case OpKind::attn_scores_bwd: case OpKind::attn_softmax_bwd: case OpKind::attn_context_bwd:
    case OpKind::flash_attention: case OpKind::paged_flash_attention: case OpKind::varlen_flash_attention:
    case OpKind::flash_attention_bwd: return OpClass::attention;
    case OpKind::layernorm: case OpKind::layernorm_bwd: case OpKind::rmsnorm:
    case OpKind::rmsnorm_bwd: return OpClass::norm;
    case OpKind::gelu: case OpKind::gelu_bwd: case OpKind::silu_mul: case OpKind::silu_mul_bwd:
    case OpKind::rope: case OpKind::varlen_rope: case OpKind::rope_bwd: case OpKind::residual_add:
      return OpClass::pointwise;
    // Joining two attention blocks' outputs is element-wise, memory-bound like an add.
    case OpKind::attn_merge: return OpClass::pointwise;
    // Routing is a row-wise top-k and softmax over E logits, pointwise-like in cost; the
    // rest move rows between token and expert order (combine also scales them) in kernels that
    // stream device memory as element-wise kernels do, not on the copy engines the memory class
    // is fitted to (copies to and from the host, memsets).
    case OpKind::moe_route: case OpKind::moe_route_bwd: return OpClass::pointwise;
    case OpKind::moe_dispatch: case OpKind::moe_dispatch_bwd: case OpKind::moe_combine:
    case OpKind::moe_combine_bwd: return OpClass::pointwise;
    case OpKind::add_rmsnorm: case OpKind::add_layernorm: return OpClass::norm;
    case OpKind::embedding: case OpKind::embedding_bwd: return OpClass::embedding;
    case OpKind::cross_entropy: return OpClass::loss;
    case OpKind::adamw: return OpClass::optimizer;
    case OpKind::kv_append: case OpKind::paged_kv_append: case OpKind::varlen_kv_append:
    case OpKind::copy: case OpKind::slice_last_token: case OpKind::varlen_slice_last_token:
      return OpClass::memory;
    case OpKind::collective: return OpClass::communication;
    case OpKind::host: return OpClass::host;
  }
  return OpClass::host;
}

std::string_view name_of(OpKind k) {
  switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attn_scores: return "attn_scores";
    case OpKind::attn_softmax: return "attn_softmax";
    case OpKind::attn_context: return "attn_context";
    case OpKind::attn_scores_bwd: return "attn_scores_bwd";
    case OpKind::attn_softmax_bwd: return "attn_softmax_bwd";
    case OpKind::attn_context_bwd: return "attn_context_bwd";
    case OpKind::flash_attention: return "flash_attention";
    case OpKind::paged_flash_attention: return "paged_flash_attention";
    case OpKind::varlen_flash_attention: return "varlen_flash_attention";
    case OpKind::flash_attention_bwd: return "flash_attention_bwd";
    case OpKind::attn_merge: return "attn_merge";
    case OpKind::layernorm: return "layernorm";
    case OpKind::layernorm_bwd: return "layernorm_bwd";
    case OpKind::rmsnorm: return "rmsnorm";
    case OpKind::rmsnorm_bwd: return "rmsnorm_bwd";
    case OpKind::gelu: return "gelu";
    case OpKind::gelu_bwd: return "gelu_bwd";
    case OpKind::silu_mul: return "silu_mul";
    case OpKind::silu_mul_bwd: return "silu_mul_bwd";
    case OpKind::rope: return "rope";
    case OpKind::varlen_rope: return "varlen_rope";
    case OpKind::rope_bwd: return "rope_bwd";
    case OpKind::residual_add: return "residual_add";
    case OpKind::embedding: return "embedding";
    case OpKind::embedding_bwd: return "embedding_bwd";
    case OpKind::cross_entropy: return "cross_entropy";
    case OpKind::adamw: return "adamw";
    case OpKind::add_rmsnorm: return "add_rmsnorm";
    case OpKind::add_layernorm: return "add_layernorm";
    case OpKind::slice_last_token: return "slice_last_token";
    case OpKind::varlen_slice_last_token: return "varlen_slice_last_token";
    case OpKind::moe_route: return "moe_route";
    case OpKind::moe_route_bwd: return "moe_route_bwd";
    case OpKind::moe_dispatch: return "moe_dispatch";
    case OpKind::moe_dispatch_bwd: return "moe_dispatch_bwd";
    case OpKind::moe_combine: return "moe_combine";
    case OpKind::moe_combine_bwd: return "moe_combine_bwd";
    case OpKind::kv_append: return "kv_append";
    case OpKind::paged_kv_append: return "paged_kv_append";
    case OpKind::varlen_kv_append: return "varlen_kv_append";
    case OpKind::copy: return "copy";
    case OpKind::collective: return "collective";
    case OpKind::host: return "host";
  }
  return "?";
}

std::string_view name_of(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::attention: return "attention";
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
  // OpKind values are consecutive from gemm to host.
  for (int k = 0; k <= static_cast<int>(OpKind::host); ++k)
    if (s == name_of(static_cast<OpKind>(k))) return static_cast<OpKind>(k);
  return std::nullopt;
}

std::optional<Collective> parse_collective(std::string_view s) {
  for (Collective c : all_collectives)
    if (s == name_of(c)) return c;
  return std::nullopt;
}

bool reads_kv_pages(OpKind k) {
  return k == OpKind::paged_flash_attention || k == OpKind::varlen_flash_attention ||
         k == OpKind::paged_kv_append || k == OpKind::varlen_kv_append;
}

std::optional<OpKind> paged_kind_of(OpKind k) {
  if (k == OpKind::flash_attention) return OpKind::paged_flash_attention;
  if (k == OpKind::kv_append) return OpKind::paged_kv_append;
  return std::nullopt;
}

OpKind calibration_family(OpKind k) {
  switch (k) {
    case OpKind::paged_flash_attention:
    case OpKind::varlen_flash_attention: return OpKind::flash_attention;
    case OpKind::paged_kv_append:
    case OpKind::varlen_kv_append: return OpKind::kv_append;
    case OpKind::varlen_rope: return OpKind::rope;
    case OpKind::varlen_slice_last_token: return OpKind::slice_last_token;
    default: return k;
  }
}

std::optional<DType> fixed_operand_dtype(OpKind k, bool is_output, std::size_t i) {
  switch (k) {
    case OpKind::embedding:
    case OpKind::embedding_bwd:
      if (!is_output && i == 0) return DType::int32;  // ids
      break;
    case OpKind::cross_entropy:
      if (!is_output && i == 1) return DType::int32;  // targets
      if (is_output && i == 0) return DType::fp32;    // loss
      break;
    case OpKind::flash_attention:
      if (is_output && i == 1) return DType::fp32;    // LSE
      break;
    case OpKind::paged_flash_attention:
    case OpKind::varlen_flash_attention:
      if (is_output && i == 1) return DType::fp32;    // LSE
      if (!is_output && i >= 3) return DType::int32;  // the block table (varlen: query starts, KV lengths)
      break;
    case OpKind::paged_kv_append:
    case OpKind::varlen_kv_append:
      if (!is_output && i == 2) return DType::int32;  // the block table (varlen: the slots)
      break;
    case OpKind::varlen_rope:
      if (!is_output && i == 1) return DType::int32;  // positions
      break;
    case OpKind::varlen_slice_last_token:
      if (!is_output && i == 1) return DType::int32;  // the rows kept
      break;
    case OpKind::flash_attention_bwd:
      if (!is_output && i == 5) return DType::fp32;   // LSE
      break;
    case OpKind::attn_merge:
      if (i % 2 == 1) return DType::fp32;             // the LSEs
      break;
    // Routing: weights and their gradients fp32, expert ids and buffer slots int32.
    case OpKind::moe_route:
      if (is_output) return i == 0 ? DType::fp32 : DType::int32;  // weights; experts, slots
      break;
    case OpKind::moe_route_bwd:
      if (is_output) return DType::fp32;              // dlogits
      if (i == 1) return DType::int32;                // experts
      if (i == 2) return DType::fp32;                 // dweights
      break;
    case OpKind::moe_dispatch:
    case OpKind::moe_dispatch_bwd:
      if (!is_output && (i == 1 || i == 2)) return DType::int32;  // experts, slots
      break;
    case OpKind::moe_combine:
      if (!is_output && (i == 1 || i == 2)) return DType::int32;  // experts, slots
      if (!is_output && i == 3) return DType::fp32;                // weights
      break;
    case OpKind::moe_combine_bwd:
      if (!is_output && (i == 2 || i == 3)) return DType::int32;  // experts, slots
      if (!is_output && i == 4) return DType::fp32;                // weights
      if (is_output && i == 1) return DType::fp32;                 // dweights
      break;
    default: break;
  }
  return std::nullopt;
}

}  // namespace perfsim
