// The operator vocabulary of the workload graph and the classes reports group them by.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "core/config/dtype.hpp"

namespace perfsim {

// Inputs -> outputs (tensor ids, in this order) and layouts, with what each kind computes. The
// operands' names, fixed types and optional ones are data: each kind's row in the table of
// op_kind.cpp (signature_of), with its name, class and calibration family. Shapes are row-major;
// T = tokens (batch*seq), h = features. Backends and builders both follow this table. Each kind
// has one layout: a KV cache read through pages is its own kind (paged_*), and so is a serving
// engine's packed step of sequences of different lengths (varlen_*, core/builders/engine_step.cpp:
// S sequences, T tokens, told where they lie by int32 inputs).
enum class OpKind {
  gemm,               // {A, B} (+C when accumulate) -> {C}: C[m,n] (+)= op(A)[m,k]·op(B)[k,n];
                      // batch > 1: [batch, ...] contiguous per operand
  attn_scores,        // {Q, K} -> {S}: S[b,h,q,kv] = Q·K^T / sqrt(head_dim) per head
  attn_softmax,       // {S} -> {P}: softmax over kv; masked (causal) entries are 0
  attn_context,       // {P, V} -> {O}: O[b,q,h,d] = P·V
  attn_context_bwd,   // {dO, P, V} -> {dP, dV}
  attn_softmax_bwd,   // {P, dP} -> {dS}: dS = P ⊙ (dP − rowsum(dP ⊙ P))
  attn_scores_bwd,    // {dS, Q, K} -> {dQ, dK} (scale applied; GQA sums dK over the group)
  flash_attention,    // {Q, K, V} -> {O, LSE[b,h,q] fp32}: no S or P in memory (decode too);
                      // K, V [b, kv_capacity, kv_heads, d], attrs.kv_block == 0
  paged_flash_attention,  // {Q, K pages, V pages, block table[b, max_blocks] int32} -> {O, LSE}:
                      // pages [num_blocks, attrs.kv_block, kv_heads, d]; key j of sequence s in
                      // page table[s][j / kv_block], row j % kv_block (the paged_kv pass)
  varlen_flash_attention, // {Q[T,H,d], K pages, V pages, block table[S,max_blocks], query_start[S+1],
                      // kv_len[S]} (int32 metadata) -> {O[T,H,d], LSE[H,T] fp32}: query i of
                      // sequence s (rows query_start[s].., q_len of them) sees its keys
                      // 0 .. kv_len[s] − q_len + i
  flash_attention_bwd,// {Q, K, V, O, dO, LSE} -> {dQ, dK, dV}, recomputing S tile by tile
  attn_merge,         // {O_a, LSE_a, O_b, LSE_b} -> {O, LSE}: two attention blocks over disjoint
                      // keys joined (ring attention): LSE = log(e^LSE_a + e^LSE_b),
                      // O = e^(LSE_a − LSE)·O_a + e^(LSE_b − LSE)·O_b; LSEs fp32 [b,h,q]
  layernorm,          // {x, gamma, beta} -> {y}            x: [rows, cols]
  layernorm_bwd,      // {x, gamma, dy} -> {dx, dgamma, dbeta} (statistics recomputed from x)
  rmsnorm,            // {x, gamma} -> {y}
  rmsnorm_bwd,        // {x, gamma, dy} -> {dx, dgamma}
  gelu,               // {x} -> {y} (tanh approximation)
  gelu_bwd,           // {x, dy} -> {dx}
  silu_mul,           // {gate, up} -> {y}: SwiGLU y = silu(gate) ⊙ up
  silu_mul_bwd,       // {gate, up, dy} -> {dgate, dup}
  rope,               // {x[T, heads, head_dim]} -> {y}: rotate pairs (i, i + d/2), base 10000;
                      // row t of a sequence of seq_q rows sits at position attrs.position + t % seq_q
  varlen_rope,        // {x[T, heads, head_dim], positions[T] int32} -> {y}: row t at positions[t]
  rope_bwd,           // {dy} -> {dx}: the inverse rotation
  residual_add,       // {a, b} -> {out = a + b} (also accumulates gradients of two branches)
  embedding,          // {ids[T] int32, table[V,h]} (+ positions[max_seq,h]) -> {x[T,h]}
                      // row t sits at position attrs.position + t % attrs.seq_q
  embedding_bwd,      // {ids, dx} -> {dtable} (+ {dpositions}): scatter-add; with
                      // attrs.accumulate the output tables are inputs too and are added into
  cross_entropy,      // {logits[T,V], targets[T] int32} -> {loss[T] fp32, dlogits[T,V]}
  adamw,              // groups {param, grad, m, v} (+ low-precision weight when param is an fp32
                      // master) -> {param, m, v} (+ weight). attrs.passes: unfused kernels
                      // make several passes over the data, a fused one makes one.
  add_rmsnorm,        // {a, b, gamma} -> {sum, y}: residual_add + rmsnorm in one pass (fusion)
  add_layernorm,      // {a, b, gamma, beta} -> {sum, y}: residual_add + layernorm (fusion)
  kv_append,          // {k_new[b, seq_q, kv_heads, d], cache[b, capacity, kv_heads, d]} -> {cache}:
                      // writes rows at attrs.position; attrs.kv_block == 0
  paged_kv_append,    // {k_new[b, seq_q, kv_heads, d], pages, block table[b, max_blocks] int32}
                      // -> {pages}: pages [num_blocks, attrs.kv_block, kv_heads, d], rows at
                      // attrs.position through the table (the paged_kv pass)
  varlen_kv_append,   // {k_new[T, kv_heads, d], pages, slots[T] int32} -> {pages}: row t into
                      // page slots[t] / kv_block, row slots[t] % kv_block (−1: not written)
  slice_last_token,   // {x[b*seq_q, cols]} -> {y[b, cols]}: each sequence's last row
  varlen_slice_last_token,  // {x[T, cols], rows[n] int32} -> {y[n, cols]}: y[i] = x[rows[i]]
  // Mixture of experts (E experts, top-k routing, capacity C rows per expert). T = tokens.
  moe_route,          // {logits[T,E]} -> {weights[T,k] fp32, experts[T,k] int32, slots[T,k] int32}:
                      // each token's k largest logits (ties: lower expert), weights = softmax over
                      // those k (= softmax over E renormalised on the top k); slot = the token's
                      // row in its expert's buffer, filled in token order (t, then j), -1 once
                      // the expert holds attrs.capacity rows (the token is dropped there)
  moe_route_bwd,      // {logits, experts, dweights} -> {dlogits[T,E] fp32}: through the softmax
                      // over the top k; 0 off the top k
  moe_dispatch,       // {x[T,h], experts, slots} -> {xe[E,C,h]}: xe[e,s] = x[t]; unused rows 0
  moe_dispatch_bwd,   // {dxe[E,C,h], experts, slots} -> {dx[T,h]}: dx[t] = Σ_j dxe[e_j, s_j]
  moe_combine,        // {ye[E,C,h], experts, slots, weights} -> {y[T,h]}:
                      // y[t] = Σ_j weights[t,j]·ye[e_j, s_j] over the kept slots
  moe_combine_bwd,    // {dy[T,h], ye, experts, slots, weights} -> {dye[E,C,h], dweights[T,k] fp32}:
                      // dye[e_j,s_j] = weights[t,j]·dy[t] (unused rows 0); dweights = dy[t]·ye[e_j,s_j]
  // Convolutional networks, NHWC (attrs.conv: x [batch, height, width, channels], y [batch,
  // out_h, out_w, filters]); filters w [filters, kernel_h, kernel_w, channels / groups].
  conv2d,             // {x, w} (+ bias[filters]) -> {y}: cross-correlation with stride, padding (zeros),
                      // dilation, groups; the bias added, then max(y, 0) with attrs.conv_relu (an
                      // inference conv with its batch norm and ReLU folded in, the fusion pass)
  conv2d_dgrad,       // {dy, w} -> {dx}: the gradient of x
  conv2d_wgrad,       // {x, dy} -> {dw}: the gradient of w (summed over the batch)
  batchnorm,          // {x[rows, C], gamma, beta} -> {y, mean[C] fp32, rstd[C] fp32}: per-channel
                      // statistics of the batch (rows = batch·height·width), biased variance
  batchnorm_infer,    // {x, gamma, beta, mean[C] fp32, var[C] fp32} -> {y}: running statistics
  batchnorm_bwd,      // {x, gamma, mean, rstd, dy} -> {dx, dgamma, dbeta}
  relu,               // {x} -> {y = max(x, 0)}
  relu_bwd,           // {y, dy} -> {dx = dy where y > 0}
  maxpool,            // {x} -> {y}: max over each window (attrs.conv, filters = channels); padding
                      // never wins
  maxpool_bwd,        // {x, dy} -> {dx}: dy to each window's first maximum, summed where windows overlap
  avgpool,            // {x} -> {y}: mean over each window's in-bounds elements (a window of the
                      // whole image is global average pooling)
  avgpool_bwd,        // {dy} -> {dx}: each dy shared out over its window's in-bounds elements
  copy,               // {x} -> {y}: same bytes; the residences say the direction: upload
                      // (host x), download (host y) or device to device
  collective,         // all_reduce, all_gather, reduce_scatter, all_to_all, send_recv
  host,               // host-side work with a fixed cost (stays last: op_kind_count)
};

inline constexpr std::size_t op_kind_count = static_cast<std::size_t>(OpKind::host) + 1;
// Every kind, in declaration order (for tables indexed by kind and tests that sweep them).
[[nodiscard]] constexpr OpKind op_kind_at(std::size_t i) { return static_cast<OpKind>(i); }

// Report groups. Efficiency tables are keyed by class, not kind.
enum class OpClass { gemm, attention, conv, norm, pointwise, embedding, loss, optimizer, memory,
                     communication, host };

inline constexpr OpClass all_op_classes[] = {
    OpClass::gemm,      OpClass::attention, OpClass::conv,      OpClass::norm,
    OpClass::pointwise, OpClass::embedding, OpClass::loss,      OpClass::optimizer,
    OpClass::memory,    OpClass::communication, OpClass::host};

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
inline constexpr Collective all_collectives[] = {Collective::all_reduce, Collective::all_gather,
                                                 Collective::reduce_scatter, Collective::all_to_all,
                                                 Collective::send_recv};

[[nodiscard]] OpClass class_of(OpKind k);
[[nodiscard]] std::string_view name_of(OpKind k);
[[nodiscard]] std::string_view name_of(OpClass c);
[[nodiscard]] std::string_view name_of(Collective c);
[[nodiscard]] std::optional<OpClass> parse_op_class(std::string_view s);
[[nodiscard]] std::optional<OpKind> parse_op_kind(std::string_view s);
[[nodiscard]] std::optional<Collective> parse_collective(std::string_view s);

// Whether a kind's K/V operand is a page pool of attrs.kv_block rows per page: the paged kinds
// and varlen_flash_attention, varlen_kv_append. Every other kind has attrs.kv_block == 0.
[[nodiscard]] bool reads_kv_pages(OpKind k);
// Whether a kind appends to a KV cache or attends over one (forward): the kv_append and
// flash_attention families, contiguous, paged or varlen. Only these read or write an fp8 cache.
[[nodiscard]] bool appends_or_attends_kv(OpKind k);
// The paged kind of a kind that reads or writes a contiguous KV cache (flash_attention,
// kv_append), what the paged_kv pass makes of it; nullopt for the others.
[[nodiscard]] std::optional<OpKind> paged_kind_of(OpKind k);
// The kind whose calibration curves and host dispatch an op of kind k shares: its dense kind
// for a paged or varlen kind (paged_flash_attention -> flash_attention), k itself otherwise.
// Profiles and saved calibration points key curves and dispatch by this name, the layout by the
// curve's variant ("flash_attention/bf16/memory/paged"), so profiles written by earlier
// versions, which knew no paged or varlen kind, price these ops as they did.
[[nodiscard]] OpKind calibration_family(OpKind k);

// One operand of a kind's signature: its name, its dtype when the kind fixes it (token ids,
// targets, block tables and a varlen op's metadata are int32; losses and log-sum-exps fp32;
// nullopt: the op's precision), and whether it may be left out (trailing operands only).
struct OperandSpec {
  std::string_view name;
  std::optional<DType> fixed;
  bool optional = false;
};
// A kind's inputs and outputs in order, as the table in op_kind.cpp states them
// ("Q K V -> O LSE:f32"). variadic: groups or lists of any length follow the named operands
// (adamw's parameter groups, a collective's buffers, a host op's).
struct OpSignature {
  std::vector<OperandSpec> inputs, outputs;
  bool variadic = false;
  [[nodiscard]] std::size_t min_inputs() const;
  [[nodiscard]] std::size_t min_outputs() const;
};
[[nodiscard]] const OpSignature& signature_of(OpKind k);
// The signature as written in the table, for messages and docs ("Q K V -> O LSE:f32").
[[nodiscard]] std::string_view signature_text(OpKind k);

// The dtype input or output i of kind k has whatever the op's precision (signature_of); nullopt
// when it follows the op's precision. Every backend and the workspace plan read operand types
// through this one table.
[[nodiscard]] std::optional<DType> fixed_operand_dtype(OpKind k, bool is_output, std::size_t i);

}  // namespace perfsim
