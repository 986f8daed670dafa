// The CUDA backend's kernel table (see cuda_kernel_table.hpp): one entry per op kind.
#include "backends/cuda/cuda_kernel_table.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <stdexcept>
#include <type_traits>

#include "backends/cuda/kernels/attention_materialized.cuh"
#include "backends/cuda/kernels/cross_entropy.cuh"
#include "backends/cuda/kernels/decode_attention.cuh"
#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"
#include "backends/cuda/kernels/memory_ops.cuh"
#include "backends/cuda/kernels/moe.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "backends/cuda/kernels/pointwise.cuh"
#include "backends/cuda/kernels/varlen_attention.cuh"
#include "backends/ops/context_parallel.hpp"
#include "backends/ops/op_io.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/cost/workspace.hpp"

namespace perfsim::cuda {

namespace {

using namespace ops;  // the views and shape functions every entry names

// Seq_q up to this runs flash attention's forward with the split-KV decode kernel.
constexpr int64_t decode_max_seq_q = decode_kernel_max_seq_q;

// A ring block's part or a context-parallel rank's rows (context_parallel.hpp).
template <class Shape, class T> Shape on_rank(Shape s, const CudaCall<T>& c) { return on_context_rank(s, c.op, c.rank); }

template <class T> float eps(const CudaCall<T>& c) { return static_cast<float>(c.op.attrs.eps); }

// The materialized attention products run as batched cuBLAS GEMMs; the backward ones may need
// a workspace of their own.
template <class T> AttnGemm attn_blas(const CudaCall<T>& c, const AttnShape& a, bool backward) {
  if (c.blas == nullptr) throw std::logic_error("cuda backend: attention products without a cuBLAS handle");
  AttnGemm blas{c.blas->handle(), c.blas->workspace(), BlasHandle::workspace_bytes, c.op.dtype == DType::tf32, nullptr};
  if (const auto bytes = static_cast<std::size_t>(attn_grad_workspace_bytes(a, static_cast<int>(sizeof(T))));
      backward && bytes > 0)
    blas.workspace = c.scratch(bytes);
  return blas;
}

template <class T> float* float_scratch(const CudaCall<T>& c, int64_t floats) {
  return static_cast<float*>(c.scratch(static_cast<std::size_t>(floats) * sizeof(float)));
}

template <class P> auto* as_fp8(P* p) {
  using Fp8 = std::conditional_t<std::is_const_v<P>, const __nv_fp8_e4m3, __nv_fp8_e4m3>;
  return reinterpret_cast<Fp8*>(p);
}

// Calls f with the cache operands p... as stored. The views type every float operand T, and
// run_generic hands an fp8 KV cache (the fp8_kv pass, kv.fp8) to the kernels as its bytes,
// unstaged, so here they become __nv_fp8_e4m3. The appends write fp8 from any float type;
// attention reads it under bf16/fp16 only (op_unsupported_reason declines fp32).
template <class T, bool attention, class F, class... P>
void as_stored(const KvStorage& kv, F&& f, P*... p) {
  if (!kv.fp8) return f(p...);
  if constexpr (attention && std::is_same_v<T, float>)
    throw std::logic_error("cuda backend: fp32 attention over an fp8 KV cache (op_unsupported_reason declines it)");
  else
    f(as_fp8(p)...);
}

template <class T>
const KernelTable<CudaKernel<T>> typed_table{
    {OpKind::attn_scores,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AttnScoresIO<T>>();
       const AttnShape a = attn_shape(c.op, c.g);
       attn_scores(io.q, io.k, io.s, a, attn_blas(c, a, false), c.stream);
     }},
    {OpKind::attn_softmax,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AttnSoftmaxIO<T>>();
       attn_softmax(io.s, io.p, attn_shape(c.op, c.g), c.stream);
     }},
    {OpKind::attn_context,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AttnContextIO<T>>();
       const AttnShape a = attn_shape(c.op, c.g);
       attn_context(io.p, io.v, io.o, a, attn_blas(c, a, false), c.stream);
     }},
    {OpKind::attn_context_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AttnContextBwdIO<T>>();
       const AttnShape a = attn_shape(c.op, c.g);
       attn_context_bwd(io.d_o, io.p, io.v, io.dp, io.dv, a, attn_blas(c, a, true), c.stream);
     }},
    {OpKind::attn_softmax_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AttnSoftmaxBwdIO<T>>();
       attn_softmax_bwd(io.p, io.dp, io.ds, attn_shape(c.op, c.g), c.stream);
     }},
    {OpKind::attn_scores_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AttnScoresBwdIO<T>>();
       const AttnShape a = attn_shape(c.op, c.g);
       attn_scores_bwd(io.ds, io.q, io.k, io.dq, io.dk, a, attn_blas(c, a, true), c.stream);
     }},
    {OpKind::flash_attention,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<FlashAttnIO<T>>();
       const AttnShape a = on_rank(attn_shape(c.op, c.g), c);
       as_stored<T, true>(
           a.kv,
           [&](const auto* k, const auto* v) {
             // Ring attention's blocks after the first run the flash kernel on every rank (workspace.cpp).
             if (a.seq_q <= decode_max_seq_q && c.op.attrs.ring_step == 0) {
               void* ws = c.scratch(static_cast<std::size_t>(decode_attention_workspace_bytes(a)));
               decode_attention(io.q, k, v, io.o, io.lse, a, ws, c.stream);
               return;
             }
             flash_attention(io.q, k, v, io.o, io.lse, a, c.stream);
           },
           io.k, io.v);
     }},
    {OpKind::paged_flash_attention,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<PagedFlashAttnIO<T>>();
       const AttnShape a = on_rank(attn_shape(c.op, c.g), c);
       void* ws = c.scratch(static_cast<std::size_t>(decode_attention_workspace_bytes(a)));
       as_stored<T, true>(
           a.kv,
           [&](const auto* k, const auto* v) {
             paged_decode_attention(io.q, k, v, io.table, int(a.paged.block), int(a.paged.max_blocks), io.o, io.lse,
                                    a, ws, c.stream);
           },
           io.k_pages, io.v_pages);
     }},
    {OpKind::varlen_flash_attention,
     [](const CudaCall<T>& c) {
       // No workspace (workspace.cpp plans none): the decodes' splits merge inside a thread-block
       // cluster. With varlen_attention_workspace_bytes(a) planned and passed, they would merge
       // through it instead, faster on long contexts (varlen_attention.cuh).
       const auto io = c.template view<VarlenFlashAttnIO<T>>();
       const VarlenAttnShape a = varlen_attn_shape(c.op, c.g);
       as_stored<T, true>(
           a.kv,
           [&](const auto* k, const auto* v) {
             varlen_flash_attention(io.q, k, v, io.table, io.query_start, io.kv_len, io.o, io.lse, a, c.stream);
           },
           io.k_pages, io.v_pages);
     }},
    {OpKind::flash_attention_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<FlashAttnBwdIO<T>>();
       const AttnShape a = on_rank(attn_shape(c.op, c.g), c);
       void* ws = c.scratch(static_cast<std::size_t>(flash_attention_bwd_workspace_bytes(a, int(sizeof(T)))));
       flash_attention_bwd(io.q, io.k, io.v, io.o, io.d_o, io.lse, io.dq, io.dk, io.dv, a, ws, c.stream);
     }},
    {OpKind::attn_merge,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AttnMergeIO<T>>();
       attn_merge(io.o_a, io.lse_a, io.o_b, io.lse_b, io.o, io.lse, attn_shape(c.op, c.g), c.stream);
     }},
    {OpKind::layernorm,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<LayernormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       layernorm(io.x, io.gamma, io.beta, io.y, rc.rows, rc.cols, eps(c), c.stream);
     }},
    {OpKind::layernorm_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<LayernormBwdIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       float* ws = float_scratch(c, norm_bwd_workspace_floats(rc.rows, rc.cols));
       layernorm_bwd(io.x, io.gamma, io.dy, io.dx, io.dgamma, io.dbeta, rc.rows, rc.cols, eps(c), ws, c.stream);
     }},
    {OpKind::rmsnorm,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<RmsnormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       rmsnorm(io.x, io.gamma, io.y, rc.rows, rc.cols, eps(c), c.stream);
     }},
    {OpKind::rmsnorm_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<RmsnormBwdIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       float* ws = float_scratch(c, norm_bwd_workspace_floats(rc.rows, rc.cols));
       rmsnorm_bwd(io.x, io.gamma, io.dy, io.dx, io.dgamma, rc.rows, rc.cols, eps(c), ws, c.stream);
     }},
    {OpKind::add_rmsnorm,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AddRmsnormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       add_rmsnorm(io.a, io.b, io.gamma, io.sum, io.y, rc.rows, rc.cols, eps(c), c.stream);
     }},
    {OpKind::add_layernorm,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<AddLayernormIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       add_layernorm(io.a, io.b, io.gamma, io.beta, io.sum, io.y, rc.rows, rc.cols, eps(c), c.stream);
     }},
    {OpKind::cross_entropy,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<CrossEntropyIO<T>>();
       const RowsCols rc = row_shape(c.op, c.g);
       cross_entropy(io.logits, io.targets, io.loss, io.dlogits, rc.rows, rc.cols, c.stream, c.op.attrs.loss_rows);
     }},
    {OpKind::gelu,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<UnaryIO<T>>();
       gelu(io.x, io.y, elementwise_count(c.op, c.g), c.stream);
     }},
    {OpKind::gelu_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<GeluBwdIO<T>>();
       gelu_bwd(io.x, io.dy, io.dx, elementwise_count(c.op, c.g), c.stream);
     }},
    {OpKind::silu_mul,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<SiluMulIO<T>>();
       silu_mul(io.gate, io.up, io.y, elementwise_count(c.op, c.g), c.stream);
     }},
    {OpKind::silu_mul_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<SiluMulBwdIO<T>>();
       silu_mul_bwd(io.gate, io.up, io.dy, io.dgate, io.dup, elementwise_count(c.op, c.g), c.stream);
     }},
    {OpKind::residual_add,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<ResidualAddIO<T>>();
       residual_add(io.a, io.b, io.out, elementwise_count(c.op, c.g), c.stream);
     }},
    {OpKind::rope,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<RopeIO<T>>();
       rope(io.x, io.y, on_rank(rope_shape(c.op, c.g), c), c.stream);
     }},
    {OpKind::varlen_rope,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<VarlenRopeIO<T>>();
       rope_at(io.x, io.positions, io.y, rope_shape(c.op, c.g), c.stream);
     }},
    {OpKind::rope_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<RopeIO<T>>();
       rope_bwd(io.x, io.y, on_rank(rope_shape(c.op, c.g), c), c.stream);
     }},
    {OpKind::embedding,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<EmbeddingIO<T>>();
       embedding(io.ids, io.table, io.positions, io.x, on_rank(embedding_shape(c.op, c.g), c), c.stream);
     }},
    {OpKind::embedding_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<EmbeddingBwdIO<T>>();
       const EmbeddingShape e = on_rank(embedding_shape(c.op, c.g), c);
       float* ws = float_scratch(c, embedding_bwd_workspace_floats<T>(e, io.dpositions != nullptr));
       embedding_bwd(io.ids, io.dx, io.dtable, io.dpositions, e, ws, c.stream);
     }},
    {OpKind::kv_append,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<KvAppendIO<T>>();
       const KvAppendShape s = kv_append_shape(c.op, c.g);
       as_stored<T, false>(s.kv, [&](auto* cache) { kv_append(io.k_new, cache, s, c.stream); }, io.cache);
     }},
    {OpKind::paged_kv_append,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<PagedKvAppendIO<T>>();
       const KvAppendShape s = kv_append_shape(c.op, c.g);
       as_stored<T, false>(
           s.kv, [&](auto* pages) { paged_kv_append(io.k_new, pages, io.table, s, s.paged, c.stream); }, io.pages);
     }},
    {OpKind::varlen_kv_append,
     [](const CudaCall<T>& c) {  // run_generic made the output hold the pages
       const auto io = c.template view<VarlenKvAppendIO<T>>();
       const KvSlotsShape s = kv_slots_shape(c.op, c.g);
       as_stored<T, false>(
           s.kv,
           [&](auto* pages) {
             kv_append_slots(io.k_new, pages, io.slots, s.tokens, s.row, s.pool_rows, c.stream, s.kv);
           },
           io.pages);
     }},
    {OpKind::slice_last_token,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<SliceLastTokenIO<T>>();
       const SliceShape s = slice_shape(c.op, c.g);
       slice_last_token(io.x, io.y, s.batch, s.seq, s.cols, c.stream);
     }},
    {OpKind::varlen_slice_last_token,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<GatherRowsIO<T>>();
       const GatherShape s = gather_shape(c.op, c.g);
       gather_rows(io.x, io.rows, io.y, s.n, s.x_rows, s.cols, c.stream);
     }},
    {OpKind::moe_route,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<MoeRouteIO<T>>();
       moe_route(io.logits, io.weights, io.experts, io.slots, moe_shape(c.op, c.g), c.stream);
     }},
    {OpKind::moe_route_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<MoeRouteBwdIO<T>>();
       moe_route_bwd(io.logits, io.experts, io.dweights, io.dlogits, moe_shape(c.op, c.g), c.stream);
     }},
    {OpKind::moe_dispatch,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<MoeDispatchIO<T>>();
       moe_dispatch(io.x, io.experts, io.slots, io.y, moe_shape(c.op, c.g), c.stream);
     }},
    {OpKind::moe_dispatch_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<MoeDispatchIO<T>>();
       moe_dispatch_bwd(io.x, io.experts, io.slots, io.y, moe_shape(c.op, c.g), c.stream);
     }},
    {OpKind::moe_combine,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<MoeCombineIO<T>>();
       moe_combine(io.ye, io.experts, io.slots, io.weights, io.y, moe_shape(c.op, c.g), c.stream);
     }},
    {OpKind::moe_combine_bwd,
     [](const CudaCall<T>& c) {
       const auto io = c.template view<MoeCombineBwdIO<T>>();
       moe_combine_bwd(io.dy, io.ye, io.experts, io.slots, io.weights, io.dye, io.dweights, moe_shape(c.op, c.g),
                       c.stream);
     }},
};

}  // namespace

template <class T> const KernelTable<CudaKernel<T>>& typed_kernels() { return typed_table<T>; }
template const KernelTable<CudaKernel<float>>& typed_kernels<float>();
template const KernelTable<CudaKernel<__nv_bfloat16>>& typed_kernels<__nv_bfloat16>();
template const KernelTable<CudaKernel<__half>>& typed_kernels<__half>();

}  // namespace perfsim::cuda
