// The generic ops on the GPU: OpExecutor::run_generic stages operands stored in another
// float type than the op computes in, then run_typed calls the kernel of the op's kind with
// one storage type T for all float operands (norms, pointwise, embedding, loss, attention);
// on a rank whose graph splits the vocabulary, the embedding and loss ops over it go to
// run_vocab_parallel (cuda_vocab_parallel.hpp) instead.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "backends/ops/context_parallel.hpp"
#include "backends/ops/op_shapes.hpp"
#include "backends/ops/vocab_shard.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/cuda/cuda_op_util.hpp"
#include "backends/cuda/cuda_vocab_parallel.hpp"
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
#include "core/cost/workspace.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

using op_detail::elem;
using op_detail::fail;
using op_detail::fixed_elem;
using op_detail::is_float;

namespace {

// Seq_q up to this runs flash attention's forward with the split-KV decode kernel.
constexpr int64_t decode_max_seq_q = decode_kernel_max_seq_q;

// Kernel calls for ops whose float operands share one storage T. `rank`: the executing global
// rank, whose place says a context-parallel op's rows (backends/ops/context_parallel.hpp).
template <class T>
void run_typed(const Op& op, const Graph& g, const std::vector<void*>& in, const std::vector<void*>& out,
               const std::function<void*(std::size_t)>& scratch, const BlasHandle* blas_handle, cudaStream_t st,
               int rank) {
  auto I = [&](std::size_t i) { return static_cast<const T*>(in.at(i)); };
  auto O = [&](std::size_t i) { return static_cast<T*>(out.at(i)); };
  [[maybe_unused]] auto ids = [&](std::size_t i) { return static_cast<const int32_t*>(in.at(i)); };
  // Operands fixed to fp32 or int32 whatever T is (fixed_operand_dtype).
  [[maybe_unused]] auto f32 = [&](std::size_t i) { return static_cast<const float*>(in.at(i)); };
  [[maybe_unused]] auto f32_out = [&](std::size_t i) { return static_cast<float*>(out.at(i)); };
  [[maybe_unused]] auto ids_out = [&](std::size_t i) { return static_cast<int32_t*>(out.at(i)); };
  [[maybe_unused]] const auto eps = static_cast<float>(op.attrs.eps);
  switch (op.kind) {
    case OpKind::attn_softmax: attn_softmax(I(0), O(0), ops::attn_shape(op, g), st); return;
    case OpKind::attn_softmax_bwd: attn_softmax_bwd(I(0), I(1), O(0), ops::attn_shape(op, g), st); return;
    case OpKind::attn_scores:
    case OpKind::attn_context:
    case OpKind::attn_context_bwd:
    case OpKind::attn_scores_bwd: {
      if (blas_handle == nullptr) throw std::logic_error("cuda backend: attention products without a cuBLAS handle");
      const ops::AttnShape a = ops::attn_shape(op, g);
      AttnGemm blas{blas_handle->handle(), blas_handle->workspace(), BlasHandle::workspace_bytes,
                    op.dtype == DType::tf32, nullptr};
      if (const auto bytes = static_cast<std::size_t>(attn_grad_workspace_bytes(a, static_cast<int>(sizeof(T))));
          bytes > 0 && (op.kind == OpKind::attn_context_bwd || op.kind == OpKind::attn_scores_bwd))
        blas.workspace = scratch(bytes);
      if (op.kind == OpKind::attn_scores) attn_scores(I(0), I(1), O(0), a, blas, st);
      else if (op.kind == OpKind::attn_context) attn_context(I(0), I(1), O(0), a, blas, st);
      else if (op.kind == OpKind::attn_context_bwd) attn_context_bwd(I(0), I(1), I(2), O(0), O(1), a, blas, st);
      else attn_scores_bwd(I(0), I(1), I(2), O(0), O(1), a, blas, st);
      return;
    }
    case OpKind::varlen_flash_attention:  // {Q, K pages, V pages, table, query starts, KV lengths}
      // No workspace (workspace.cpp plans none): the decodes' splits merge inside a thread-block
      // cluster. With varlen_attention_workspace_bytes(a) planned and passed, they would merge
      // through it instead, faster on long contexts (varlen_attention.cuh).
      varlen_flash_attention(I(0), I(1), I(2), ids(3), ids(4), ids(5), O(0), f32_out(1), ops::varlen_attn_shape(op, g),
                             st);
      return;
    case OpKind::paged_flash_attention: {
      const ops::AttnShape a = ops::on_context_rank(ops::attn_shape(op, g), op, rank);
      void* ws = scratch(static_cast<std::size_t>(decode_attention_workspace_bytes(a)));
      paged_decode_attention(I(0), I(1), I(2), ids(3), int(a.paged.block), int(a.paged.max_blocks), O(0), f32_out(1), a,
                             ws, st);
      return;
    }
    case OpKind::flash_attention: {
      const ops::AttnShape a = ops::on_context_rank(ops::attn_shape(op, g), op, rank);
      auto* lse = static_cast<float*>(out.at(1));
      // Ring attention's blocks after the first run the flash kernel on every rank (workspace.cpp).
      if (a.seq_q <= decode_max_seq_q && op.attrs.ring_step == 0) {
        void* ws = scratch(static_cast<std::size_t>(decode_attention_workspace_bytes(a)));
        decode_attention(I(0), I(1), I(2), O(0), lse, a, ws, st);
        return;
      }
      flash_attention(I(0), I(1), I(2), O(0), lse, a, st);
      return;
    }
    case OpKind::flash_attention_bwd: {
      const ops::AttnShape a = ops::on_context_rank(ops::attn_shape(op, g), op, rank);
      void* ws = scratch(static_cast<std::size_t>(flash_attention_bwd_workspace_bytes(a, int(sizeof(T)))));
      flash_attention_bwd(I(0), I(1), I(2), I(3), I(4), static_cast<const float*>(in.at(5)), O(0), O(1), O(2), a,
                          ws, st);
      return;
    }
    case OpKind::attn_merge:
      attn_merge(I(0), f32(1), I(2), f32(3), O(0), f32_out(1), ops::attn_shape(op, g), st);
      return;
    case OpKind::layernorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      layernorm(I(0), I(1), I(2), O(0), rc.rows, rc.cols, eps, st);
      return;
    }
    case OpKind::layernorm_bwd: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      auto* ws = static_cast<float*>(scratch(static_cast<std::size_t>(norm_bwd_workspace_floats(rc.rows, rc.cols)) * 4));
      layernorm_bwd(I(0), I(1), I(2), O(0), O(1), O(2), rc.rows, rc.cols, eps, ws, st);
      return;
    }
    case OpKind::rmsnorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      rmsnorm(I(0), I(1), O(0), rc.rows, rc.cols, eps, st);
      return;
    }
    case OpKind::rmsnorm_bwd: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      auto* ws = static_cast<float*>(scratch(static_cast<std::size_t>(norm_bwd_workspace_floats(rc.rows, rc.cols)) * 4));
      rmsnorm_bwd(I(0), I(1), I(2), O(0), O(1), rc.rows, rc.cols, eps, ws, st);
      return;
    }
    case OpKind::add_rmsnorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      add_rmsnorm(I(0), I(1), I(2), O(0), O(1), rc.rows, rc.cols, eps, st);
      return;
    }
    case OpKind::add_layernorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      add_layernorm(I(0), I(1), I(2), I(3), O(0), O(1), rc.rows, rc.cols, eps, st);
      return;
    }
    case OpKind::cross_entropy: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      cross_entropy(I(0), ids(1), static_cast<float*>(out.at(0)), out.size() > 1 ? O(1) : nullptr, rc.rows, rc.cols,
                    st, op.attrs.loss_rows);
      return;
    }
    case OpKind::gelu: gelu(I(0), O(0), ops::elementwise_count(op, g), st); return;
    case OpKind::gelu_bwd: gelu_bwd(I(0), I(1), O(0), ops::elementwise_count(op, g), st); return;
    case OpKind::silu_mul: silu_mul(I(0), I(1), O(0), ops::elementwise_count(op, g), st); return;
    case OpKind::silu_mul_bwd: silu_mul_bwd(I(0), I(1), I(2), O(0), O(1), ops::elementwise_count(op, g), st); return;
    case OpKind::residual_add: residual_add(I(0), I(1), O(0), ops::elementwise_count(op, g), st); return;
    case OpKind::rope: rope(I(0), O(0), ops::on_context_rank(ops::rope_shape(op, g), op, rank), st); return;
    case OpKind::varlen_rope: rope_at(I(0), ids(1), O(0), ops::rope_shape(op, g), st); return;
    case OpKind::rope_bwd: rope_bwd(I(0), O(0), ops::on_context_rank(ops::rope_shape(op, g), op, rank), st); return;
    case OpKind::embedding:
      embedding(ids(0), I(1), in.size() > 2 ? I(2) : nullptr, O(0),
                ops::on_context_rank(ops::embedding_shape(op, g), op, rank), st);
      return;
    case OpKind::embedding_bwd: {
      const ops::EmbeddingShape e = ops::on_context_rank(ops::embedding_shape(op, g), op, rank);
      const bool with_pos = out.size() > 1;
      auto* ws = static_cast<float*>(
          scratch(static_cast<std::size_t>(embedding_bwd_workspace_floats<T>(e, with_pos)) * sizeof(float)));
      embedding_bwd(ids(0), I(1), O(0), with_pos ? O(1) : nullptr, e, ws, st);
      return;
    }
    // The appends work in place: run_generic made the output hold the cache or pages.
    case OpKind::kv_append: kv_append(I(0), O(0), ops::kv_append_shape(op, g), st); return;
    case OpKind::paged_kv_append: {
      const ops::KvAppendShape s = ops::kv_append_shape(op, g);
      paged_kv_append(I(0), O(0), ids(2), s, s.paged, st);
      return;
    }
    case OpKind::varlen_kv_append: {
      const ops::KvSlotsShape s = ops::kv_slots_shape(op, g);
      kv_append_slots(I(0), O(0), ids(2), s.tokens, s.row, s.pool_rows, st);
      return;
    }
    case OpKind::slice_last_token: {
      const ops::SliceShape s = ops::slice_shape(op, g);
      slice_last_token(I(0), O(0), s.batch, s.seq, s.cols, st);
      return;
    }
    case OpKind::varlen_slice_last_token: {
      const ops::GatherShape s = ops::gather_shape(op, g);
      gather_rows(I(0), ids(1), O(0), s.n, s.x_rows, s.cols, st);
      return;
    }
    case OpKind::moe_route: moe_route(I(0), f32_out(0), ids_out(1), ids_out(2), ops::moe_shape(op, g), st); return;
    case OpKind::moe_route_bwd: moe_route_bwd(I(0), ids(1), f32(2), f32_out(0), ops::moe_shape(op, g), st); return;
    case OpKind::moe_dispatch: moe_dispatch(I(0), ids(1), ids(2), O(0), ops::moe_shape(op, g), st); return;
    case OpKind::moe_dispatch_bwd: moe_dispatch_bwd(I(0), ids(1), ids(2), O(0), ops::moe_shape(op, g), st); return;
    case OpKind::moe_combine: moe_combine(I(0), ids(1), ids(2), f32(3), O(0), ops::moe_shape(op, g), st); return;
    case OpKind::moe_combine_bwd:
      moe_combine_bwd(I(0), I(1), ids(2), ids(3), f32(4), O(0), f32_out(1), ops::moe_shape(op, g), st);
      return;
    default: break;
  }
  // Unreachable for a checked op: op_unsupported_reason turns away every kind not above.
  throw NotExecutable(fmt::format("cuda backend: no kernel for {}", name_of(op.kind)));
}

}  // namespace

void OpExecutor::run_generic(const Op& op, const std::vector<void*>& buf) {
  const Graph& g = m_graph;
  if (op.kind == OpKind::copy) {
    const int64_t n = ops::elementwise_count(op, g);
    const int x = op.inputs[0], y = op.outputs[0];
    copy_tensor(buf[static_cast<std::size_t>(x)], storage_of(elem(g, x)), buf[static_cast<std::size_t>(y)],
                storage_of(elem(g, y)), n, m_stream);
    return;
  }
  // Outputs that start from an input's values (in place when the graph names one tensor).
  const bool appends =
      op.kind == OpKind::kv_append || op.kind == OpKind::paged_kv_append || op.kind == OpKind::varlen_kv_append;
  if (appends) copy_if_distinct(buf, op.inputs[1], op.outputs[0]);
  if (op.kind == OpKind::embedding_bwd && op.attrs.accumulate)
    for (std::size_t j = 0; j < op.outputs.size(); ++j) copy_if_distinct(buf, op.inputs.at(2 + j), op.outputs[j]);

  std::optional<Elem> kernel;
  for (std::size_t i = 0; i < op.inputs.size() && !kernel; ++i)
    if (!fixed_elem(op.kind, false, i)) kernel = elem(g, op.inputs[i]);
  if (!kernel || !is_float(*kernel))
    fail(op, fmt::format("needs floating-point operands, got {}", kernel ? name_of(*kernel) : "none"));

  std::map<int, void*> staged;  // tensor id -> converted copy
  std::vector<std::tuple<int, void*, Elem>> write_back;  // id, staged copy, its type
  auto operand = [&](int id, Elem need, bool is_output) -> void* {
    void* real = buf[static_cast<std::size_t>(id)];
    const Elem have = elem(g, id);
    if (have == need) return real;
    if (!is_float(have) || !is_float(need))
      fail(op, fmt::format("tensor '{}' is {} where the op needs {}", g.tensor(id).name, name_of(have), name_of(need)));
    const int64_t n = g.tensor(id).elements();
    auto it = staged.find(id);
    if (it == staged.end()) {
      void* p = scratch(static_cast<std::size_t>(n) * static_cast<std::size_t>(bytes_of(need)));
      if (!is_output || appends || op.kind == OpKind::embedding_bwd) convert(real, have, p, need, n, m_stream);
      it = staged.emplace(id, p).first;
    }
    if (is_output) write_back.emplace_back(id, it->second, need);
    return it->second;
  };
  std::vector<void*>& in = m_in;
  std::vector<void*>& out = m_out;
  in.clear(), out.clear();
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    in.push_back(operand(op.inputs[i], fixed_elem(op.kind, false, i).value_or(*kernel), false));
  for (std::size_t i = 0; i < op.outputs.size(); ++i)
    out.push_back(operand(op.outputs[i], fixed_elem(op.kind, true, i).value_or(*kernel), true));

  const std::function<void*(std::size_t)> scratch_fn = [this](std::size_t bytes) { return scratch(bytes); };
  const int rank = m_ranks != nullptr ? m_ranks->rank() : 0;
  if (m_ranks != nullptr && ops::on_vocab_shard(op, g)) {
    // A vocabulary split among ranks: the same staged operands, the rank's part of the op.
    const std::function<void*(std::size_t)> extra_fn = [this](std::size_t bytes) { return scratch_or_extra(bytes); };
    switch (*kernel) {
      case Elem::f32: run_vocab_parallel<float>(op, g, in, out, *m_ranks, scratch_fn, extra_fn, m_stream); break;
      case Elem::bf16:
        run_vocab_parallel<__nv_bfloat16>(op, g, in, out, *m_ranks, scratch_fn, extra_fn, m_stream);
        break;
      case Elem::f16: run_vocab_parallel<__half>(op, g, in, out, *m_ranks, scratch_fn, extra_fn, m_stream); break;
      default: break;
    }
  } else {
    switch (*kernel) {
      case Elem::f32: run_typed<float>(op, g, in, out, scratch_fn, m_blas.get(), m_stream, rank); break;
      case Elem::bf16: run_typed<__nv_bfloat16>(op, g, in, out, scratch_fn, m_blas.get(), m_stream, rank); break;
      case Elem::f16: run_typed<__half>(op, g, in, out, scratch_fn, m_blas.get(), m_stream, rank); break;
      default: break;
    }
  }
  for (const auto& [id, data, type] : write_back)
    convert(data, type, buf[static_cast<std::size_t>(id)], elem(g, id), g.tensor(id).elements(), m_stream);
}

}  // namespace perfsim::cuda
