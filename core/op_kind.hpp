// The operator vocabulary of the workload graph and the classes reports group them by.
#pragma once
#include <optional>
#include <string_view>

namespace perfsim {

enum class OpKind {
  gemm,               // C[m,n] (+)= op(A)[m,k] · op(B)[k,n], optionally batched
  attn_scores,        // S[b,h,q,kv] = scale · Q·K^T per head (GQA: kv head = h / (H/Hkv))
  attn_softmax,       // P = softmax(S) over kv, causal mask applied when attrs.causal
  attn_context,       // O[b,q,h,d] = P·V
  attn_scores_bwd,    // dQ, dK from dS (materialized backward)
  attn_softmax_bwd,   // dS = P ⊙ (dP − rowsum(dP ⊙ P))
  attn_context_bwd,   // dP, dV from dO (materialized backward)
  flash_attention,    // fused O = softmax(scale·QK^T)V without storing S (forward; decode too)
  flash_attention_bwd,// fused backward: dQ, dK, dV recomputing S tile by tile
  layernorm, layernorm_bwd,
  rmsnorm, rmsnorm_bwd,
  gelu, gelu_bwd,
  silu_mul, silu_mul_bwd,   // SwiGLU: out = silu(gate) ⊙ up
  rope, rope_bwd,
  residual_add,       // out = a + b (also used to accumulate gradients of two branches)
  embedding, embedding_bwd,
  cross_entropy,      // fused softmax + NLL forward and its gradient w.r.t. logits
  adamw,              // one optimizer update over a set of parameter tensors
  add_rmsnorm,        // fusion of residual_add + rmsnorm: outputs {sum, normed} in one pass
  add_layernorm,      // fusion of residual_add + layernorm: outputs {sum, normed} in one pass
  kv_append,          // write this step's K,V rows into the KV cache
  slice_last_token,   // [batch*seq, cols] -> [batch, cols]: each sequence's last row
  copy,               // memcpy-like (host<->device or device<->device)
  collective,         // all_reduce, all_gather, reduce_scatter, all_to_all, send_recv
  host,               // host-side work with a fixed cost
};

// Report groups. Efficiency tables are keyed by class, not kind.
enum class OpClass { gemm, attention, norm, pointwise, embedding, loss, optimizer, memory,
                     communication, host };

inline constexpr OpClass all_op_classes[] = {
    OpClass::gemm,     OpClass::attention, OpClass::norm,   OpClass::pointwise,
    OpClass::embedding, OpClass::loss,     OpClass::optimizer, OpClass::memory,
    OpClass::communication, OpClass::host};

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };

[[nodiscard]] OpClass class_of(OpKind k);
[[nodiscard]] std::string_view name_of(OpKind k);
[[nodiscard]] std::string_view name_of(OpClass c);
[[nodiscard]] std::string_view name_of(Collective c);
[[nodiscard]] std::optional<OpClass> parse_op_class(std::string_view s);

}  // namespace perfsim
