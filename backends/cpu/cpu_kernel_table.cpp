// The CPU backend's kernel table (see cpu_kernel_table.hpp): one entry per op kind it runs.
#include "backends/cpu/cpu_kernel_table.hpp"

#include <fmt/format.h>

#include <cstring>

#include "backends/common/quantized_weights.hpp"
#include "backends/common/scalar.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/ops/context_parallel.hpp"
#include "backends/ops/op_io.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/cost/kernel_paths.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

using namespace ops;  // the views and shape functions every entry names

bool is_float(Storage s) { return s == Storage::f32 || s == Storage::bf16 || s == Storage::f16; }
Storage storage(const Graph& g, int id) { return storage_of(g.tensor(id).dtype); }
void* buffer(const MixedCall& c, int id) { return c.buffers[static_cast<std::size_t>(id)]; }

[[noreturn]] void fail(const Op& op, const std::string& what) {
  throw NotExecutable(fmt::format("cpu backend: op '{}' ({}): {}", op.name, name_of(op.kind), what));
}

// Makes an output hold its input's values when the graph names two tensors.
void copy_if_distinct(const MixedCall& c, int from, int to) {
  if (from == to) return;
  copy_tensor(buffer(c, from), storage(c.g, from), buffer(c, to), storage(c.g, to), c.g.tensor(to).elements());
}

// A GEMM on a quantized weight (int8_weights, int4_weights, w8a8). Up to quantized_small_m rows
// (decode): fused with the dequantization (host::quantized_gemv). More: the weight dequantized
// into fp32 scratch first, and under W8A8 (an int8 GEMM) A's rows quantized to int8 as its kernel
// reads them; then the float GEMM. Scratch: K·N floats, M·K more under W8A8, then the float
// GEMM's workspace (core/cost/workspace.cpp prices the same).
constexpr int64_t quantized_small_m = quantized_fused_rows;  // core/cost/kernel_paths.hpp

void run_quantized_gemm(const MixedCall& c, const GemmShape& s, const GemmIds& id, const host::QuantLayout& q) {
  const Storage ta = storage(c.g, id.a), tc = storage(c.g, id.c);
  if (s.batch != 1 || s.trans_b || !is_float(ta) || !is_float(tc))
    fail(c.op, "a quantized weight's GEMM takes one [K, N] weight and float activations");
  const bool int8 = c.op.dtype == DType::int8;
  if (s.m <= quantized_small_m) {
    // A decode's few rows: fused, without the weight's fp32 copy (M·K + M·N floats of scratch).
    auto* scratch = static_cast<float*>(c.scratch.get(static_cast<std::size_t>(s.m * (s.k + s.n)) * sizeof(float)));
    float* rows = scratch;
    float* out = scratch + s.m * s.k;
    if (s.trans_a) fail(c.op, "a quantized weight's GEMM takes A stored [M, K]");
    host::convert(buffer(c, id.a), ta, rows, Storage::f32, s.m * s.k);
    if (int8) host::fake_quantize_rows(rows, s.m, s.k);
    host::quantized_gemv(rows, s.m, buffer(c, id.b), q, out);
    if (s.accumulate) {
      std::vector<float> prev(static_cast<std::size_t>(s.m * s.n));
      host::convert(buffer(c, id.c), tc, prev.data(), Storage::f32, s.m * s.n);
      for (std::size_t i = 0; i < prev.size(); ++i) out[i] += prev[i];
    }
    host::convert(out, Storage::f32, buffer(c, id.c), tc, s.m * s.n);
    return;
  }
  const int64_t ws = gemm_workspace_floats(s, int8 ? Storage::f32 : ta, Storage::f32, tc);
  auto* scratch = static_cast<float*>(
      c.scratch.get(static_cast<std::size_t>(q.k * q.n + (int8 ? s.m * s.k : 0) + ws) * sizeof(float)));
  float* weight = scratch;
  host::dequantize(buffer(c, id.b), q, weight);
  const void* a = buffer(c, id.a);
  Storage a_type = ta;
  if (int8) {
    float* rows = scratch + q.k * q.n;
    if (s.trans_a) fail(c.op, "an int8 GEMM takes A stored [M, K]");
    host::convert(a, ta, rows, Storage::f32, s.m * s.k);
    host::fake_quantize_rows(rows, s.m, s.k);
    a = rows;
    a_type = Storage::f32;
  }
  float* workspace = scratch + q.k * q.n + (int8 ? s.m * s.k : 0);
  gemm(a, a_type, weight, Storage::f32, buffer(c, id.c), tc, s, workspace);
}

void run_gemm(const MixedCall& c) {
  const GemmShape s = gemm_shape(c.op, c.g);
  const GemmIds id = gemm_ids(c.op);
  if (s.accumulate) copy_if_distinct(c, id.c_in, id.c);
  if (const host::QuantLayout q = host::quant_layout(c.g.tensor(id.b)); q.k > 0) {
    run_quantized_gemm(c, s, id, q);
    return;
  }
  const Storage ta = storage(c.g, id.a), tb = storage(c.g, id.b), tc = storage(c.g, id.c);
  for (Storage t : {ta, tb, tc})
    if (!is_float(t)) fail(c.op, fmt::format("gemm operands must be fp32/tf32/bf16/fp16, got {}", name_of(t)));
  const int64_t ws = gemm_workspace_floats(s, ta, tb, tc);
  auto* workspace = static_cast<float*>(c.scratch.get(static_cast<std::size_t>(ws) * sizeof(float)));
  gemm(buffer(c, id.a), ta, buffer(c, id.b), tb, buffer(c, id.c), tc, s, workspace);
}

void run_adamw(const MixedCall& c) {
  std::vector<AdamWGroup> groups;
  for (const AdamWGroupIds& ids : adamw_groups(c.op, c.g)) {
    copy_if_distinct(c, ids.param, ids.param_out);
    copy_if_distinct(c, ids.m, ids.m_out);
    copy_if_distinct(c, ids.v, ids.v_out);
    AdamWGroup gr;
    gr.param = buffer(c, ids.param_out), gr.param_type = storage(c.g, ids.param_out);
    gr.grad = buffer(c, ids.grad), gr.grad_type = storage(c.g, ids.grad);
    gr.m = buffer(c, ids.m_out), gr.m_type = storage(c.g, ids.m_out);
    gr.v = buffer(c, ids.v_out), gr.v_type = storage(c.g, ids.v_out);
    if (ids.weight_out >= 0) gr.weight = buffer(c, ids.weight_out), gr.weight_type = storage(c.g, ids.weight_out);
    gr.n = c.g.tensor(ids.param).elements();
    for (Storage t : {gr.param_type, gr.grad_type, gr.m_type, gr.v_type})
      if (!is_float(t)) fail(c.op, fmt::format("AdamW tensors must be floating point, got {}", name_of(t)));
    groups.push_back(gr);
  }
  adamw(groups, adamw_params(c.op), c.op.attrs.passes);
}

void run_copy(const MixedCall& c) {
  const int64_t n = elementwise_count(c.op, c.g);
  const CopyIds id = copy_ids(c.op);
  const Storage tx = storage(c.g, id.x), ty = storage(c.g, id.y);
  if ((c.g.tensor(id.x).on_host() || c.g.tensor(id.y).on_host()) && tx == ty) {
    // An upload or download: host and "device" are both host memory here, so it is one plain
    // memcpy by the calling thread, as a driver's staging copy is.
    std::memcpy(buffer(c, id.y), buffer(c, id.x), static_cast<std::size_t>(n * bytes_of(tx)));
    return;
  }
  copy_tensor(buffer(c, id.x), tx, buffer(c, id.y), ty, n);
}

// An fp8 KV cache's bytes behind a view's T pointer: execute_op hands such a cache over as it is
// (has_fp8_kv_kernel), and the kernels then read or write it as fp8 (the shape's KvStorage).
template <class T> const fp8_e4m3* fp8_rows(const T* p) { return reinterpret_cast<const fp8_e4m3*>(p); }
template <class T> fp8_e4m3* fp8_rows(T* p) { return reinterpret_cast<fp8_e4m3*>(p); }

// A ring block's part or a context-parallel rank's rows (context_parallel.hpp).
template <class Shape, class T> Shape on_rank(Shape s, const TypedCall<T>& c) { return on_context_rank(s, c.op, c.rank); }

template <class T>
const KernelTable<TypedKernel<T>> typed_table{
    {OpKind::attn_scores,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AttnScoresIO<T>>();
       attn_scores(io.q, io.k, io.s, attn_shape(c.op, c.g));
     }},
    {OpKind::attn_softmax,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AttnSoftmaxIO<T>>();
       attn_softmax(io.s, io.p, attn_shape(c.op, c.g));
     }},
    {OpKind::attn_context,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AttnContextIO<T>>();
       attn_context(io.p, io.v, io.o, attn_shape(c.op, c.g));
     }},
    {OpKind::attn_context_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AttnContextBwdIO<T>>();
       attn_context_bwd(io.d_o, io.p, io.v, io.dp, io.dv, attn_shape(c.op, c.g));
     }},
    {OpKind::attn_softmax_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AttnSoftmaxBwdIO<T>>();
       attn_softmax_bwd(io.p, io.dp, io.ds, attn_shape(c.op, c.g));
     }},
    {OpKind::attn_scores_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AttnScoresBwdIO<T>>();
       attn_scores_bwd(io.ds, io.q, io.k, io.dq, io.dk, attn_shape(c.op, c.g));
     }},
    {OpKind::flash_attention,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<FlashAttnIO<T>>();
       const AttnShape a = on_rank(attn_shape(c.op, c.g), c);
       if (a.kv.fp8) flash_attention(io.q, fp8_rows(io.k), fp8_rows(io.v), io.o, io.lse, a);
       else flash_attention(io.q, io.k, io.v, io.o, io.lse, a);
     }},
    {OpKind::paged_flash_attention,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<PagedFlashAttnIO<T>>();
       const AttnShape a = on_rank(attn_shape(c.op, c.g), c);
       if (a.kv.fp8)
         paged_flash_attention(io.q, fp8_rows(io.k_pages), fp8_rows(io.v_pages), io.table, a.paged, io.o, io.lse, a);
       else
         paged_flash_attention(io.q, io.k_pages, io.v_pages, io.table, a.paged, io.o, io.lse, a);
     }},
    {OpKind::varlen_flash_attention,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<VarlenFlashAttnIO<T>>();
       const VarlenAttnShape a = varlen_attn_shape(c.op, c.g);
       if (a.kv.fp8)
         varlen_flash_attention(io.q, fp8_rows(io.k_pages), fp8_rows(io.v_pages), io.table, io.query_start,
                                io.kv_len, io.o, io.lse, a);
       else
         varlen_flash_attention(io.q, io.k_pages, io.v_pages, io.table, io.query_start, io.kv_len, io.o, io.lse, a);
     }},
    {OpKind::flash_attention_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<FlashAttnBwdIO<T>>();
       flash_attention_bwd(io.q, io.k, io.v, io.o, io.d_o, io.lse, io.dq, io.dk, io.dv,
                           on_rank(attn_shape(c.op, c.g), c));
     }},
    {OpKind::attn_merge,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AttnMergeIO<T>>();
       attn_merge(io.o_a, io.lse_a, io.o_b, io.lse_b, io.o, io.lse, attn_shape(c.op, c.g));
     }},
    {OpKind::layernorm,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<LayernormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       layernorm(io.x, io.gamma, io.beta, io.y, rc.rows, rc.cols, static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::layernorm_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<LayernormBwdIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       layernorm_bwd(io.x, io.gamma, io.dy, io.dx, io.dgamma, io.dbeta, rc.rows, rc.cols,
                     static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::rmsnorm,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<RmsnormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       rmsnorm(io.x, io.gamma, io.y, rc.rows, rc.cols, static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::rmsnorm_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<RmsnormBwdIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       rmsnorm_bwd(io.x, io.gamma, io.dy, io.dx, io.dgamma, rc.rows, rc.cols, static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::add_rmsnorm,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AddRmsnormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       add_rmsnorm(io.a, io.b, io.gamma, io.sum, io.y, rc.rows, rc.cols, static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::add_layernorm,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<AddLayernormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       add_layernorm(io.a, io.b, io.gamma, io.beta, io.sum, io.y, rc.rows, rc.cols,
                     static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::cross_entropy,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<CrossEntropyIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       cross_entropy(io.logits, io.targets, io.loss, io.dlogits, rc.rows, rc.cols, c.op.attrs.loss_rows);
     }},
    {OpKind::gelu,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<UnaryIO<T>>();
       gelu(io.x, io.y, elementwise_count(c.op, c.g));
     }},
    {OpKind::relu,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<UnaryIO<T>>();
       relu(io.x, io.y, elementwise_count(c.op, c.g));
     }},
    {OpKind::relu_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<ReluBwdIO<T>>();
       relu_bwd(io.y, io.dy, io.dx, elementwise_count(c.op, c.g));
     }},
    {OpKind::conv2d,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<Conv2dIO<T>>();
       conv2d(io.x, io.w, io.bias, io.y, conv_shape(c.op, c.g));
     }},
    {OpKind::conv2d_dgrad,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<Conv2dDgradIO<T>>();
       conv2d_dgrad(io.dy, io.w, io.dx, conv_shape(c.op, c.g));
     }},
    {OpKind::conv2d_wgrad,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<Conv2dWgradIO<T>>();
       conv2d_wgrad(io.x, io.dy, io.dw, conv_shape(c.op, c.g));
     }},
    {OpKind::maxpool,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<UnaryIO<T>>();
       maxpool(io.x, io.y, conv_shape(c.op, c.g));
     }},
    {OpKind::maxpool_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<MaxpoolBwdIO<T>>();
       maxpool_bwd(io.x, io.dy, io.dx, conv_shape(c.op, c.g));
     }},
    {OpKind::avgpool,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<UnaryIO<T>>();
       avgpool(io.x, io.y, conv_shape(c.op, c.g));
     }},
    {OpKind::avgpool_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<UnaryIO<T>>();
       avgpool_bwd(io.x, io.y, conv_shape(c.op, c.g));
     }},
    {OpKind::batchnorm,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<BatchnormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       batchnorm(io.x, io.gamma, io.beta, io.y, io.mean, io.rstd, rc.rows, rc.cols, static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::batchnorm_infer,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<BatchnormInferIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       batchnorm_infer(io.x, io.gamma, io.beta, io.mean, io.var, io.y, rc.rows, rc.cols,
                       static_cast<float>(c.op.attrs.eps));
     }},
    {OpKind::batchnorm_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<BatchnormBwdIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       batchnorm_bwd(io.x, io.gamma, io.mean, io.rstd, io.dy, io.dx, io.dgamma, io.dbeta, rc.rows, rc.cols);
     }},
    {OpKind::gelu_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<GeluBwdIO<T>>();
       gelu_bwd(io.x, io.dy, io.dx, elementwise_count(c.op, c.g));
     }},
    {OpKind::silu_mul,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<SiluMulIO<T>>();
       silu_mul(io.gate, io.up, io.y, elementwise_count(c.op, c.g));
     }},
    {OpKind::silu_mul_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<SiluMulBwdIO<T>>();
       silu_mul_bwd(io.gate, io.up, io.dy, io.dgate, io.dup, elementwise_count(c.op, c.g));
     }},
    {OpKind::residual_add,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<ResidualAddIO<T>>();
       residual_add(io.a, io.b, io.out, elementwise_count(c.op, c.g));
     }},
    {OpKind::rope,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<RopeIO<T>>();
       rope(io.x, io.y, on_rank(rope_shape(c.op, c.g), c));
     }},
    {OpKind::varlen_rope,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<VarlenRopeIO<T>>();
       rope_at(io.x, io.positions, io.y, rope_shape(c.op, c.g));
     }},
    {OpKind::rope_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<RopeIO<T>>();
       rope_bwd(io.x, io.y, on_rank(rope_shape(c.op, c.g), c));
     }},
    {OpKind::embedding,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<EmbeddingIO<T>>();
       embedding(io.ids, io.table, io.positions, io.x, on_rank(embedding_shape(c.op, c.g), c));
     }},
    {OpKind::embedding_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<EmbeddingBwdIO<T>>();
       embedding_bwd(io.ids, io.dx, io.dtable, io.dpositions, on_rank(embedding_shape(c.op, c.g), c));
     }},
    {OpKind::kv_append,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<KvAppendIO<T>>();
       const KvAppendShape s = kv_append_shape(c.op, c.g);
       if (s.kv.fp8) kv_append(io.k_new, fp8_rows(io.cache), s);
       else kv_append(io.k_new, io.cache, s);
     }},
    {OpKind::paged_kv_append,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<PagedKvAppendIO<T>>();
       const KvAppendShape s = kv_append_shape(c.op, c.g);
       if (s.kv.fp8) paged_kv_append(io.k_new, fp8_rows(io.pages), io.table, s, s.paged);
       else paged_kv_append(io.k_new, io.pages, io.table, s, s.paged);
     }},
    {OpKind::varlen_kv_append,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<VarlenKvAppendIO<T>>();
       const KvSlotsShape s = kv_slots_shape(c.op, c.g);
       if (s.kv.fp8) kv_append_slots(io.k_new, fp8_rows(io.pages), io.slots, s.tokens, s.row, s.pool_rows, s.kv);
       else kv_append_slots(io.k_new, io.pages, io.slots, s.tokens, s.row, s.pool_rows, s.kv);
     }},
    {OpKind::slice_last_token,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<SliceLastTokenIO<T>>();
       const SliceShape s = slice_shape(c.op, c.g);
       slice_last_token(io.x, io.y, s.batch, s.seq, s.cols);
     }},
    {OpKind::varlen_slice_last_token,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<GatherRowsIO<T>>();
       const GatherShape s = gather_shape(c.op, c.g);
       gather_rows(io.x, io.rows, io.y, s.n, s.x_rows, s.cols);
     }},
    {OpKind::moe_route,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<MoeRouteIO<T>>();
       moe_route(io.logits, io.weights, io.experts, io.slots, moe_shape(c.op, c.g));
     }},
    {OpKind::moe_route_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<MoeRouteBwdIO<T>>();
       moe_route_bwd(io.logits, io.experts, io.dweights, io.dlogits, moe_shape(c.op, c.g));
     }},
    {OpKind::moe_dispatch,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<MoeDispatchIO<T>>();
       moe_dispatch(io.x, io.experts, io.slots, io.y, moe_shape(c.op, c.g));
     }},
    {OpKind::moe_dispatch_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<MoeDispatchIO<T>>();
       moe_dispatch_bwd(io.x, io.experts, io.slots, io.y, moe_shape(c.op, c.g));
     }},
    {OpKind::moe_combine,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<MoeCombineIO<T>>();
       moe_combine(io.ye, io.experts, io.slots, io.weights, io.y, moe_shape(c.op, c.g));
     }},
    {OpKind::moe_combine_bwd,
     [](const TypedCall<T>& c) {
       const auto io = c.template view<MoeCombineBwdIO<T>>();
       moe_combine_bwd(io.dy, io.ye, io.experts, io.slots, io.weights, io.dye, io.dweights, moe_shape(c.op, c.g));
     }},
};

const KernelTable<MixedKernel> mixed_table{
    {OpKind::gemm, run_gemm},
    {OpKind::adamw, run_adamw},
    {OpKind::copy, run_copy},
};

}  // namespace

template <class T> const KernelTable<TypedKernel<T>>& typed_kernels() { return typed_table<T>; }
template const KernelTable<TypedKernel<float>>& typed_kernels<float>();
template const KernelTable<TypedKernel<bf16>>& typed_kernels<bf16>();
template const KernelTable<TypedKernel<half>>& typed_kernels<half>();

const KernelTable<MixedKernel>& mixed_kernels() { return mixed_table; }

bool has_kernel(OpKind k) { return mixed_table.has(k) || typed_table<float>.has(k); }

bool has_fp8_kv_kernel(OpKind k) { return appends_or_attends_kv(k); }

bool is_fp8_kv_cache(const Tensor& t) { return t.role == TensorRole::kv_cache && t.dtype == DType::fp8; }

}  // namespace perfsim::cpu
