// FLOPs and ideal memory traffic of each op kind, from its attributes and tensor dtypes.
// Per-element constants count one FLOP per arithmetic step of the usual kernel; they matter
// only for memory-bound ops, whose time the bytes decide anyway.
#include "core/graph/op_metrics.hpp"

#include <algorithm>

namespace perfsim {

namespace {

double d(int64_t v) { return static_cast<double>(v); }

// The score rectangle b·h·q·kv; attention FLOPs count all of it even when causal
// (as Megatron does: Narayanan et al. 2021, §5.1). A ring-attention block after the first
// (context parallelism, OpAttrs::ring_step) computes half of its rectangle, as many pairs as the
// causal block keeps (core/builders/rank.hpp, ring_block_rows), and is counted alike.
double score_elements(const OpAttrs& a) {
  return d(a.batch) * d(a.heads) * d(a.seq_q) * d(a.seq_kv);
}

double row_elements(const OpAttrs& a) { return d(a.rows) * d(a.cols); }

// A convolution's multiply-adds: every output element [batch, out_h, out_w, filters] sums its
// window over the channels of its group, kernel_h·kernel_w·channels / groups products. Its data
// and weight gradients are products of the same size (the usual convention, as for GEMMs).
double conv_macs(const OpAttrs& a) {
  const ConvGeometry& c = a.conv;
  return d(a.batch) * d(c.out_h()) * d(c.out_w()) * d(c.filters) * d(c.kernel_h) * d(c.kernel_w) *
         d(c.channels / std::max<int64_t>(c.groups, 1));
}

// A pooling window's taps per output element [batch, out_h, out_w, channels].
double pool_taps(const OpAttrs& a) {
  const ConvGeometry& c = a.conv;
  return d(a.batch) * d(c.out_h()) * d(c.out_w()) * d(c.channels) * d(c.kernel_h) * d(c.kernel_w);
}

// Routing choices T·k of a mixture-of-experts op, and how many of them can hold a slot: at
// most the E·C rows of the expert buffers (fewer choices than rows: all of them, the ideal
// balanced routing; metrics cannot know which tokens a router drops).
double moe_choices(const OpAttrs& a) { return d(a.rows) * d(a.top_k); }
double moe_kept(const OpAttrs& a) { return std::min(moe_choices(a), d(a.experts) * d(a.capacity)); }

// Bytes an attention op reads from a K/V tensor: a KV cache holds kv_capacity rows per
// sequence (or pages covering them) but only the first seq_kv are valid and read. A paged
// op's block table is read whole (max_blocks entries per sequence, all of them in use).
double attention_read_bytes(const Op& op, const Tensor& t) {
  const OpAttrs& a = op.attrs;
  if (t.role == TensorRole::kv_cache && (a.kv_capacity > 0 || reads_kv_pages(op.kind)))
    return d(a.batch) * d(a.seq_kv) * d(a.kv_heads) * d(a.head_dim) * bytes_of(t.dtype);
  return t.bytes();
}

}  // namespace

double op_flops(const Op& op, const Graph& g) {
  const OpAttrs& a = op.attrs;
  switch (op.kind) {
    // A multiply-add per output element per reduction step: 2·m·n·k.
    case OpKind::gemm: return 2.0 * d(a.m) * d(a.n) * d(a.k) * d(a.batch);
    // Q·K^T and P·V are each a batched gemm over the score rectangle: 2·b·h·q·kv·d.
    case OpKind::attn_scores:
    case OpKind::attn_context: return 2.0 * score_elements(a) * d(a.head_dim);
    // Each backward computes two gemms of the forward's size (dP and dV; dQ and dK).
    case OpKind::attn_context_bwd:
    case OpKind::attn_scores_bwd: return 4.0 * score_elements(a) * d(a.head_dim);
    // Safe softmax: max, subtract, exp, sum, divide (Milakov & Gimelshein 2018, Algorithm 2);
    // ALiBi first adds its bias, slope × distance (Press et al. 2022, §3): 2 more. Inside flash
    // attention the same 2 per score are left out, as its exps and sums are: it counts products.
    case OpKind::attn_softmax: return (a.alibi_heads > 0 ? 7.0 : 5.0) * score_elements(a);
    // dS = P ⊙ (dP − rowsum(dP ⊙ P)) (Dao et al. 2022, FlashAttention, App. B.2): multiply, sum,
    // subtract, multiply.
    case OpKind::attn_softmax_bwd: return 4.0 * score_elements(a);
    // Flash forward: the two gemms, 4·b·h·q·kv·d (Dao 2023, FlashAttention-2 §3.1).
    case OpKind::flash_attention:
    case OpKind::paged_flash_attention: return 4.0 * score_elements(a) * d(a.head_dim);
    // The pairs each query scores (OpAttrs::kv_pairs, one head's) in place of the rectangle.
    case OpKind::varlen_flash_attention: return 4.0 * d(a.heads) * d(a.head_dim) * a.kv_pairs;
    // Flash backward = 2.5× forward: S recomputed plus four gemms (FlashAttention-2 §4).
    case OpKind::flash_attention_bwd: return 2.5 * 4.0 * score_elements(a) * d(a.head_dim);
    // Per query row and head: the larger LSE, two differences, two exps, their sum, a log, the
    // new LSE and the two weights (10); per output element a multiply and a multiply-add (3).
    case OpKind::attn_merge:
      return d(a.batch) * d(a.seq_q) * d(a.heads) * (3.0 * d(a.head_dim) + 10.0);
    // LayerNorm (Ba et al. 2016, §3): mean, variance (subtract, square, sum), normalize,
    // scale and shift.
    case OpKind::layernorm: return 8.0 * row_elements(a);
    // RMSNorm (Zhang & Sennrich 2019): square, sum, scale by the reciprocal root,
    // multiply by gamma.
    case OpKind::rmsnorm: return 5.0 * row_elements(a);
    // Backward norms recompute the statistics and produce dx and dgamma: ~2× forward.
    case OpKind::layernorm_bwd: return 16.0 * row_elements(a);
    case OpKind::rmsnorm_bwd: return 10.0 * row_elements(a);
    // Fused residual + norm: one add per element plus the norm.
    case OpKind::add_layernorm: return 9.0 * row_elements(a);
    case OpKind::add_rmsnorm: return 6.0 * row_elements(a);
    // tanh-approximated GELU (Hendrycks & Gimpel 2016, §2): cube, two multiply-adds, tanh, add,
    // two multiplies.
    case OpKind::gelu: return 8.0 * d(a.elements);
    case OpKind::gelu_bwd: return 16.0 * d(a.elements);
    // SwiGLU silu(gate)·up (Shazeer 2020, GLU variants): exp, add, divide, two multiplies.
    case OpKind::silu_mul: return 5.0 * d(a.elements);
    case OpKind::silu_mul_bwd: return 10.0 * d(a.elements);
    // RoPE (Su et al. 2021, RoFormer): a 2-D rotation per pair, 6 FLOPs per 2 elements.
    case OpKind::rope:
    case OpKind::varlen_rope:
    case OpKind::rope_bwd: return 3.0 * d(a.elements);
    case OpKind::residual_add: return d(a.elements);
    // A table lookup; learned positions add one vector per row.
    case OpKind::embedding: return op.inputs.size() > 2 ? row_elements(a) : 0.0;
    // One scatter-add per row and table.
    case OpKind::embedding_bwd: return row_elements(a) * d(static_cast<int64_t>(op.outputs.size()));
    // Softmax over the vocabulary (5) plus the gradient p − onehot scaled by 1/T (2).
    case OpKind::cross_entropy: return 7.0 * row_elements(a);
    // AdamW per parameter (Loshchilov & Hutter 2019, Algorithm 2): m and v updates (3 + 4),
    // bias-corrected step (4), decay (1).
    case OpKind::adamw: return 12.0 * d(a.elements);
    // Router per token: k selection sweeps over E logits (a comparison each), then the softmax
    // over the k picked (subtract-and-exp, sum, divide).
    case OpKind::moe_route: return moe_choices(a) * (d(a.experts) + 3.0);
    // Softmax over the k recomputed (3), Σ w·dw (2), w·(dw − Σ) (2) per choice.
    case OpKind::moe_route_bwd: return 7.0 * moe_choices(a);
    // dx[t] sums its kept rows: an add per gathered element.
    case OpKind::moe_dispatch_bwd: return moe_kept(a) * d(a.cols);
    // y[t] = Σ w·ye: a multiply-add per gathered element.
    case OpKind::moe_combine: return 2.0 * moe_kept(a) * d(a.cols);
    // dye = w·dy (a multiply) and dweights = dy·ye (a multiply-add) per kept element.
    case OpKind::moe_combine_bwd: return 3.0 * moe_kept(a) * d(a.cols);
    // Convolutions: 2 FLOPs per multiply-add, forward and each gradient alike.
    // A folded conv+BN+ReLU adds its bias and its ReLU, one FLOP each an output element.
    case OpKind::conv2d:
      return 2.0 * conv_macs(a) + (d(op.inputs.size() > 2 ? 1 : 0) + (a.conv_relu ? 1.0 : 0.0)) *
                                      d(a.batch) * d(a.conv.out_h()) * d(a.conv.out_w()) * d(a.conv.filters);
    case OpKind::conv2d_dgrad:
    case OpKind::conv2d_wgrad: return 2.0 * conv_macs(a);
    // Batch norm (Ioffe & Szegedy 2015, Alg. 1): the mean and the variance (a sum and a sum of
    // squares: 3), then (x − μ)·rstd·γ + β (3); with running statistics only the last (3); the
    // backward sums dy and dy·x̂ per channel (4) and forms dx (6).
    case OpKind::batchnorm: return 6.0 * row_elements(a);
    case OpKind::batchnorm_infer: return 3.0 * row_elements(a);
    case OpKind::batchnorm_bwd: return 10.0 * row_elements(a);
    case OpKind::relu:
    case OpKind::relu_bwd: return d(a.elements);
    // A comparison or an add per window tap; the backward visits each window again (max: to
    // find its first maximum; mean: to share dy out).
    case OpKind::maxpool:
    case OpKind::maxpool_bwd:
    case OpKind::avgpool:
    case OpKind::avgpool_bwd: return pool_taps(a);
    case OpKind::moe_dispatch:  // a row copy
    case OpKind::kv_append:
    case OpKind::paged_kv_append:
    case OpKind::varlen_kv_append:
    case OpKind::slice_last_token:
    case OpKind::varlen_slice_last_token:
    case OpKind::copy:
    case OpKind::collective:
    case OpKind::host: return 0.0;
  }
  return 0.0;
}

double op_matmul_flops(const Op& op, const Graph& g, bool model) {
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::attn_scores:
    case OpKind::attn_context:
    case OpKind::attn_context_bwd:
    case OpKind::attn_scores_bwd:
    case OpKind::flash_attention:
    case OpKind::paged_flash_attention:
    case OpKind::varlen_flash_attention:
    case OpKind::conv2d_dgrad:
    case OpKind::conv2d_wgrad: return op_flops(op, g);
    case OpKind::conv2d: return 2.0 * conv_macs(op.attrs);  // not a folded bias or ReLU
    // dQ, dK, dV and dP: four products of the forward's size; the fifth rebuilds S.
    case OpKind::flash_attention_bwd: return model ? 0.8 * op_flops(op, g) : op_flops(op, g);
    default: return 0.0;
  }
}

double op_bytes(const Op& op, const Graph& g) {
  const OpAttrs& a = op.attrs;
  auto sum = [&](const std::vector<int>& ids) {
    double b = 0;
    for (int id : ids) b += g.tensor(id).bytes();
    return b;
  };
  switch (op.kind) {
    case OpKind::varlen_flash_attention: {
      // Q, the metadata (table, query starts, KV lengths), O and LSE once; of the pages the
      // rows the sequences hold: attrs.cols key rows per KV head, in K and in V.
      double b = g.tensor(op.inputs.at(0)).bytes() + sum(op.outputs);
      for (std::size_t i = 3; i < op.inputs.size(); ++i) b += g.tensor(op.inputs[i]).bytes();
      const double element = bytes_of(g.tensor(op.inputs.at(1)).dtype);
      const int64_t kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
      return b + 2.0 * d(a.cols) * d(kv_heads) * d(a.head_dim) * element;
    }
    case OpKind::varlen_kv_append: {
      // The T new rows read, written into their page slots; the slots.
      const Tensor& k_new = g.tensor(op.inputs.at(0));
      return k_new.bytes() + d(k_new.elements()) * bytes_of(g.tensor(op.outputs.at(0)).dtype) +
             g.tensor(op.inputs.at(2)).bytes();
    }
    // The n rows kept, read and written; the row indices.
    case OpKind::varlen_slice_last_token: return 2.0 * sum(op.outputs) + g.tensor(op.inputs.at(1)).bytes();
    // varlen_rope: x, the positions and y once, as the default below counts.
    case OpKind::kv_append:
    case OpKind::paged_kv_append: {
      // Reads the new rows and writes them into the cache; the rest of the cache is untouched.
      // A paged cache also reads one block-table entry (int32) per new row.
      const Tensor& cache = g.tensor(op.outputs.at(0));
      const double rows = d(a.batch) * d(a.seq_q) * d(a.kv_heads) * d(a.head_dim);
      const double table = op.kind == OpKind::paged_kv_append ? d(a.batch) * d(a.seq_q) * 4.0 : 0.0;
      return g.tensor(op.inputs.at(0)).bytes() + rows * bytes_of(cache.dtype) + table;
    }
    case OpKind::embedding: {
      // Token ids, one gathered row per token, the output; and of the learned positions the
      // distinct rows only: every sequence of the batch reads the same seq_q rows, which the
      // first one leaves in L2.
      double b = g.tensor(op.inputs.at(0)).bytes() + sum(op.outputs);
      b += row_elements(a) * bytes_of(g.tensor(op.inputs.at(1)).dtype);
      if (op.inputs.size() > 2) {
        const double rows = a.seq_q > 0 ? std::min(d(a.rows), d(a.seq_q)) : d(a.rows);
        b += rows * d(a.cols) * bytes_of(g.tensor(op.inputs.at(2)).dtype);
      }
      return b;
    }
    case OpKind::embedding_bwd: {
      // Ids and dx, then per table a zero fill (unless accumulating) and a read-modify-write
      // of one row per token.
      double b = g.tensor(op.inputs.at(0)).bytes() + g.tensor(op.inputs.at(1)).bytes();
      for (int id : op.outputs) {
        const Tensor& t = g.tensor(id);
        if (!a.accumulate) b += t.bytes();
        b += 2.0 * row_elements(a) * bytes_of(t.dtype);
      }
      return b;
    }
    case OpKind::slice_last_token: return 2.0 * sum(op.outputs);  // copies one row per sequence
    // Mixture of experts: the [T, k] routing tensors are read whole; expert buffers [E, C, h]
    // are written whole (unused rows zeroed) but read only at their kept rows (moe_kept).
    // moe_route (logits, then weights, experts, slots) and moe_dispatch (x, experts, slots,
    // then xe) touch every operand once: the default below.
    case OpKind::moe_route_bwd: {
      // Of the logits only the k chosen per token (the weights are recomputed from them);
      // experts and dweights whole; dlogits [T, E] whole (zeros off the top k).
      const double logits = moe_choices(a) * bytes_of(g.tensor(op.inputs.at(0)).dtype);
      return logits + g.tensor(op.inputs.at(1)).bytes() + g.tensor(op.inputs.at(2)).bytes() + sum(op.outputs);
    }
    case OpKind::moe_dispatch_bwd:
    case OpKind::moe_combine: {
      // The kept rows of the expert buffer (input 0), the routing tensors, the [T, h] output.
      double b = moe_kept(a) * d(a.cols) * bytes_of(g.tensor(op.inputs.at(0)).dtype) + sum(op.outputs);
      for (std::size_t i = 1; i < op.inputs.size(); ++i) b += g.tensor(op.inputs[i]).bytes();
      return b;
    }
    case OpKind::moe_combine_bwd: {
      // dy whole, the kept rows of ye, the routing tensors; dye and dweights written whole.
      double b = g.tensor(op.inputs.at(0)).bytes() + sum(op.outputs);
      b += moe_kept(a) * d(a.cols) * bytes_of(g.tensor(op.inputs.at(1)).dtype);
      for (std::size_t i = 2; i < op.inputs.size(); ++i) b += g.tensor(op.inputs[i]).bytes();
      return b;
    }
    case OpKind::adamw: {
      // Each group reads param, grad, m, v and writes param, m, v. Under mixed precision the
      // param is the fp32 master and the group's fifth tensor, the 16-bit weight, is only
      // written: a copy of the updated master (Micikevicius et al. 2018, §3.1).
      double b = 0;
      for (std::size_t i = 0; i < op.inputs.size();) {
        const bool master = g.tensor(op.inputs[i]).role == TensorRole::master_weight;
        for (std::size_t k = i; k < i + 4 && k < op.inputs.size(); ++k)
          b += g.tensor(op.inputs[k]).bytes();
        i += master ? 5 : 4;
      }
      // Unfused (multi-pass) AdamW streams its operands once per pass.
      return (b + sum(op.outputs)) * (a.passes > 1 ? static_cast<double>(a.passes) : 1.0);
    }
    case OpKind::host: return 0.0;
    default: break;
  }
  double in = 0;
  if (class_of(op.kind) == OpClass::attention) {
    for (int id : op.inputs) in += attention_read_bytes(op, g.tensor(id));
  } else {
    in = sum(op.inputs);
  }
  // Ops with several passes over their data stream their operands once per pass.
  const double passes = a.passes > 1 ? static_cast<double>(a.passes) : 1.0;
  return (in + sum(op.outputs)) * passes;
}

CopyDirection copy_direction(const Op& op, const Graph& g) {
  const bool from_host = !op.inputs.empty() && g.tensor(op.inputs.front()).on_host();
  const bool to_host = !op.outputs.empty() && g.tensor(op.outputs.front()).on_host();
  if (from_host && to_host) return CopyDirection::host_to_host;
  if (from_host) return CopyDirection::upload;
  if (to_host) return CopyDirection::download;
  return CopyDirection::device_to_device;
}

const Tensor* host_side(const Op& op, const Graph& g) {
  if (op.kind != OpKind::copy) return nullptr;
  switch (copy_direction(op, g)) {
    case CopyDirection::upload: return &g.tensor(op.inputs.front());
    case CopyDirection::download: return &g.tensor(op.outputs.front());
    case CopyDirection::device_to_device:
    case CopyDirection::host_to_host: break;
  }
  return nullptr;
}

std::string transfer_label(const Op& op, const Graph& g) {
  const Tensor* h = host_side(op, g);
  if (h == nullptr) return "";
  const char* memory = h->residence == Residence::host_pinned ? "pinned" : "pageable";
  const char* way = copy_direction(op, g) == CopyDirection::upload ? "upload" : "download";
  return std::string(way) + " (" + memory + ")";
}

double graph_flops(const Graph& g) {
  double total = 0;
  for (const Op& op : g.ops) total += op_flops(op, g) * op.count;
  return total;
}

int kernel_launches(const Op& op) {
  const OpAttrs& a = op.attrs;
  switch (op.kind) {
    case OpKind::attn_scores:
    case OpKind::attn_context:
    case OpKind::attn_context_bwd:
    case OpKind::attn_scores_bwd: {
      const int64_t kv = a.kv_heads > 0 ? a.kv_heads : a.heads;
      const int64_t group = kv > 0 ? std::max<int64_t>(1, a.heads / kv) : 1;
      const int64_t batch = std::max<int64_t>(1, a.batch);
      const int64_t calls = std::max<int64_t>(1, std::min(batch * group, a.heads));
      const int products = op.kind == OpKind::attn_context_bwd || op.kind == OpKind::attn_scores_bwd ? 2 : 1;
      return static_cast<int>(calls) * products;
    }
    case OpKind::gemm:
      return op.dtype == DType::fp8 ? 2 : 1;
    case OpKind::adamw:  // one sweep per pass (the CUDA backend's adamw_unfused)
      return std::clamp(a.passes, 1, 4);
    case OpKind::rmsnorm_bwd:
    case OpKind::layernorm_bwd:  // rows, then the sum of the blocks' partial weight gradients
      return 2;
    case OpKind::flash_attention_bwd:  // row dot products, the main kernel, dQ from fp32
      return 3;
    case OpKind::varlen_flash_attention:  // a step mixing decodes and prefills: a kernel for each
      return a.decode_seqs > 0 && a.decode_seqs < a.batch ? 2 : 1;
    case OpKind::moe_route:         // top-k and softmax per token, then the slot scan per expert
    case OpKind::moe_dispatch:      // zero the expert buffers, then scatter the token rows
    case OpKind::moe_combine_bwd:   // zero dye, then scatter scaled rows and reduce dweights
      return 2;
    case OpKind::embedding_bwd: {
      // Zero the gradient, scatter-add the rows; a 16-bit table accumulates in fp32 and
      // converts after. Learned positions (a second output) zero or convert their own table.
      const int positions = op.outputs.size() > 1 ? 1 : 0;
      if (op.dtype == DType::fp32) return (a.accumulate ? 0 : 1 + positions) + 1;
      return 3 + positions;
    }
    default:
      return 1;
  }
}

bool touches_fp8(const Op& op, const Graph& g) {
  if (op.dtype == DType::fp8) return true;
  for (int id : op.inputs)
    if (g.tensor(id).dtype == DType::fp8) return true;
  for (int id : op.outputs)
    if (g.tensor(id).dtype == DType::fp8) return true;
  return false;
}

}  // namespace perfsim
