// Op execution on the CPU kernels (see cpu_op_exec.hpp).
#include "backends/cpu/cpu_op_exec.hpp"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <optional>

#include "backends/ops/context_parallel.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& what) {
  throw NotExecutable(fmt::format("cpu backend: op '{}' ({}): {}", op.name, name_of(op.kind), what));
}

// Transient buffers of one op, released when it goes out of scope.
class Scratch {
 public:
  explicit Scratch(TrackingAllocator& a) : m_alloc(a) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (void* p : m_blocks) m_alloc.release(p);
  }
  void* get(std::size_t bytes) {
    void* p = m_alloc.allocate(bytes, TensorRole::workspace);
    m_blocks.push_back(p);
    return p;
  }

 private:
  TrackingAllocator& m_alloc;
  std::vector<void*> m_blocks;
};

Storage storage(const Graph& g, int id) { return storage_of(g.tensor(id).dtype); }

// Operands whose storage is fixed by the op's definition rather than by its precision.
std::optional<Storage> fixed_storage(OpKind k, bool is_output, std::size_t i) {
  if (const std::optional<DType> t = fixed_operand_dtype(k, is_output, i)) return storage_of(*t);
  return std::nullopt;
}

bool is_float(Storage s) { return s == Storage::f32 || s == Storage::bf16 || s == Storage::f16; }

// Makes an in-place output hold its input's values when the graph names two tensors.
void copy_if_distinct(const Graph& g, const std::vector<void*>& buf, int from, int to) {
  if (from == to) return;
  copy_tensor(buf[static_cast<std::size_t>(from)], storage(g, from), buf[static_cast<std::size_t>(to)],
              storage(g, to), g.tensor(to).elements());
}

void run_gemm(const Op& op, const Graph& g, const std::vector<void*>& buf, Scratch& scratch) {
  const GemmShape s = ops::gemm_shape(op, g);
  const int a = op.inputs[0], b = op.inputs[1], c = op.outputs[0];
  if (s.accumulate) copy_if_distinct(g, buf, op.inputs[2], c);
  const Storage ta = storage(g, a), tb = storage(g, b), tc = storage(g, c);
  for (Storage t : {ta, tb, tc})
    if (!is_float(t)) fail(op, fmt::format("gemm operands must be fp32/tf32/bf16/fp16, got {}", name_of(t)));
  const int64_t ws = gemm_workspace_floats(s, ta, tb, tc);
  auto* workspace = static_cast<float*>(scratch.get(static_cast<std::size_t>(ws) * sizeof(float)));
  gemm(buf[static_cast<std::size_t>(a)], ta, buf[static_cast<std::size_t>(b)], tb,
       buf[static_cast<std::size_t>(c)], tc, s, workspace);
}

void run_adamw(const Op& op, const Graph& g, const std::vector<void*>& buf) {
  std::vector<AdamWGroup> groups;
  auto ptr = [&](int id) { return buf[static_cast<std::size_t>(id)]; };
  for (const ops::AdamWGroupIds& ids : ops::adamw_groups(op, g)) {
    copy_if_distinct(g, buf, ids.param, ids.param_out);
    copy_if_distinct(g, buf, ids.m, ids.m_out);
    copy_if_distinct(g, buf, ids.v, ids.v_out);
    AdamWGroup gr;
    gr.param = ptr(ids.param_out), gr.param_type = storage(g, ids.param_out);
    gr.grad = ptr(ids.grad), gr.grad_type = storage(g, ids.grad);
    gr.m = ptr(ids.m_out), gr.m_type = storage(g, ids.m_out);
    gr.v = ptr(ids.v_out), gr.v_type = storage(g, ids.v_out);
    if (ids.weight_out >= 0) gr.weight = ptr(ids.weight_out), gr.weight_type = storage(g, ids.weight_out);
    gr.n = g.tensor(ids.param).elements();
    for (Storage t : {gr.param_type, gr.grad_type, gr.m_type, gr.v_type})
      if (!is_float(t)) fail(op, fmt::format("AdamW tensors must be floating point, got {}", name_of(t)));
    groups.push_back(gr);
  }
  adamw(groups, ops::adamw_params(op), op.attrs.passes);
}

// The kernel call for every op kind whose operands share one float storage T.
// `rank`: the executing global rank, whose place says a context-parallel op's rows.
template <class T>
void run_typed(const Op& op, const Graph& g, const std::vector<void*>& in, const std::vector<void*>& out, int rank) {
  auto I = [&](std::size_t i) { return static_cast<const T*>(in.at(i)); };
  auto O = [&](std::size_t i) { return static_cast<T*>(out.at(i)); };
  auto ids = [&](std::size_t i) { return static_cast<const int32_t*>(in.at(i)); };
  // Operands fixed to fp32 or int32 whatever T is (fixed_operand_dtype).
  auto f32 = [&](std::size_t i) { return static_cast<const float*>(in.at(i)); };
  auto f32_out = [&](std::size_t i) { return static_cast<float*>(out.at(i)); };
  auto ids_out = [&](std::size_t i) { return static_cast<int32_t*>(out.at(i)); };
  const auto eps = static_cast<float>(op.attrs.eps);
  switch (op.kind) {
    case OpKind::attn_scores: attn_scores(I(0), I(1), O(0), ops::attn_shape(op, g)); return;
    case OpKind::attn_softmax: attn_softmax(I(0), O(0), ops::attn_shape(op, g)); return;
    case OpKind::attn_context: attn_context(I(0), I(1), O(0), ops::attn_shape(op, g)); return;
    case OpKind::attn_context_bwd: attn_context_bwd(I(0), I(1), I(2), O(0), O(1), ops::attn_shape(op, g)); return;
    case OpKind::attn_softmax_bwd: attn_softmax_bwd(I(0), I(1), O(0), ops::attn_shape(op, g)); return;
    case OpKind::attn_scores_bwd: attn_scores_bwd(I(0), I(1), I(2), O(0), O(1), ops::attn_shape(op, g)); return;
    case OpKind::flash_attention:
      flash_attention(I(0), I(1), I(2), O(0), f32_out(1), ops::on_context_rank(ops::attn_shape(op, g), op, rank));
      return;
    case OpKind::paged_flash_attention: {
      const AttnShape a = ops::on_context_rank(ops::attn_shape(op, g), op, rank);
      paged_flash_attention(I(0), I(1), I(2), ids(3), a.paged, O(0), f32_out(1), a);
      return;
    }
    case OpKind::varlen_flash_attention:
      varlen_flash_attention(I(0), I(1), I(2), ids(3), ids(4), ids(5), O(0), f32_out(1), ops::varlen_attn_shape(op, g));
      return;
    case OpKind::flash_attention_bwd:
      flash_attention_bwd(I(0), I(1), I(2), I(3), I(4), static_cast<const float*>(in.at(5)), O(0), O(1),
                          O(2), ops::on_context_rank(ops::attn_shape(op, g), op, rank));
      return;
    case OpKind::attn_merge:
      attn_merge(I(0), f32(1), I(2), f32(3), O(0), f32_out(1), ops::attn_shape(op, g));
      return;
    case OpKind::layernorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      layernorm(I(0), I(1), I(2), O(0), rc.rows, rc.cols, eps);
      return;
    }
    case OpKind::layernorm_bwd: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      layernorm_bwd(I(0), I(1), I(2), O(0), O(1), O(2), rc.rows, rc.cols, eps);
      return;
    }
    case OpKind::rmsnorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      rmsnorm(I(0), I(1), O(0), rc.rows, rc.cols, eps);
      return;
    }
    case OpKind::rmsnorm_bwd: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      rmsnorm_bwd(I(0), I(1), I(2), O(0), O(1), rc.rows, rc.cols, eps);
      return;
    }
    case OpKind::add_rmsnorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      add_rmsnorm(I(0), I(1), I(2), O(0), O(1), rc.rows, rc.cols, eps);
      return;
    }
    case OpKind::add_layernorm: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      add_layernorm(I(0), I(1), I(2), I(3), O(0), O(1), rc.rows, rc.cols, eps);
      return;
    }
    case OpKind::cross_entropy: {
      const ops::RowsCols rc = ops::row_shape(op, g);
      cross_entropy(I(0), ids(1), static_cast<float*>(out.at(0)), out.size() > 1 ? O(1) : nullptr,
                    rc.rows, rc.cols, op.attrs.loss_rows);
      return;
    }
    case OpKind::gelu: gelu(I(0), O(0), ops::elementwise_count(op, g)); return;
    case OpKind::gelu_bwd: gelu_bwd(I(0), I(1), O(0), ops::elementwise_count(op, g)); return;
    case OpKind::silu_mul: silu_mul(I(0), I(1), O(0), ops::elementwise_count(op, g)); return;
    case OpKind::silu_mul_bwd: silu_mul_bwd(I(0), I(1), I(2), O(0), O(1), ops::elementwise_count(op, g)); return;
    case OpKind::residual_add: residual_add(I(0), I(1), O(0), ops::elementwise_count(op, g)); return;
    case OpKind::rope: rope(I(0), O(0), ops::on_context_rank(ops::rope_shape(op, g), op, rank)); return;
    case OpKind::varlen_rope: rope_at(I(0), ids(1), O(0), ops::rope_shape(op, g)); return;
    case OpKind::rope_bwd: rope_bwd(I(0), O(0), ops::on_context_rank(ops::rope_shape(op, g), op, rank)); return;
    case OpKind::embedding:
      embedding(ids(0), I(1), in.size() > 2 ? I(2) : nullptr, O(0), ops::on_context_rank(ops::embedding_shape(op, g), op, rank));
      return;
    case OpKind::embedding_bwd:
      embedding_bwd(ids(0), I(1), O(0), out.size() > 1 ? O(1) : nullptr,
                    ops::on_context_rank(ops::embedding_shape(op, g), op, rank));
      return;
    // The appends work in place: prepare_in_place made the output hold the cache or pages.
    case OpKind::kv_append: kv_append(I(0), O(0), ops::kv_append_shape(op, g)); return;
    case OpKind::paged_kv_append: {
      const KvAppendShape s = ops::kv_append_shape(op, g);
      paged_kv_append(I(0), O(0), ids(2), s, s.paged);
      return;
    }
    case OpKind::varlen_kv_append: {
      const ops::KvSlotsShape s = ops::kv_slots_shape(op, g);
      kv_append_slots(I(0), O(0), ids(2), s.tokens, s.row, s.pool_rows);
      return;
    }
    case OpKind::slice_last_token: {
      const ops::SliceShape s = ops::slice_shape(op, g);
      slice_last_token(I(0), O(0), s.batch, s.seq, s.cols);
      return;
    }
    case OpKind::varlen_slice_last_token: {
      const ops::GatherShape s = ops::gather_shape(op, g);
      gather_rows(I(0), ids(1), O(0), s.n, s.x_rows, s.cols);
      return;
    }
    case OpKind::moe_route:
      moe_route(I(0), f32_out(0), ids_out(1), ids_out(2), ops::moe_shape(op, g));
      return;
    case OpKind::moe_route_bwd: moe_route_bwd(I(0), ids(1), f32(2), f32_out(0), ops::moe_shape(op, g)); return;
    case OpKind::moe_dispatch: moe_dispatch(I(0), ids(1), ids(2), O(0), ops::moe_shape(op, g)); return;
    case OpKind::moe_dispatch_bwd: moe_dispatch_bwd(I(0), ids(1), ids(2), O(0), ops::moe_shape(op, g)); return;
    case OpKind::moe_combine: moe_combine(I(0), ids(1), ids(2), f32(3), O(0), ops::moe_shape(op, g)); return;
    case OpKind::moe_combine_bwd:
      moe_combine_bwd(I(0), I(1), ids(2), ids(3), f32(4), O(0), f32_out(1), ops::moe_shape(op, g));
      return;
    default: fail(op, "has no CPU kernel");
  }
}

// Ops whose outputs must start from the values of an input: copy when the graph names two
// different tensors for them (the kernels then work in place on the output).
void prepare_in_place(const Op& op, const Graph& g, const std::vector<void*>& buf) {
  if (op.kind == OpKind::kv_append || op.kind == OpKind::paged_kv_append || op.kind == OpKind::varlen_kv_append)
    copy_if_distinct(g, buf, op.inputs[1], op.outputs[0]);
  if (op.kind == OpKind::embedding_bwd && op.attrs.accumulate)
    for (std::size_t j = 0; j < op.outputs.size(); ++j)
      copy_if_distinct(g, buf, op.inputs.at(2 + j), op.outputs[j]);
}

}  // namespace

void execute_op(const Op& op, const Graph& g, const std::vector<void*>& buf, TrackingAllocator& alloc, int rank) {
  ops::check_arity(op);
  Scratch scratch(alloc);
  switch (op.kind) {
    case OpKind::gemm: run_gemm(op, g, buf, scratch); return;
    case OpKind::adamw: run_adamw(op, g, buf); return;
    case OpKind::copy: {
      const int64_t n = ops::elementwise_count(op, g);
      const int x = op.inputs[0], y = op.outputs[0];
      if ((g.tensor(x).on_host() || g.tensor(y).on_host()) && storage(g, x) == storage(g, y)) {
        // An upload or download: host and "device" are both host memory here, so it is one
        // plain memcpy by the calling thread, as a driver's staging copy is.
        std::memcpy(buf[static_cast<std::size_t>(y)], buf[static_cast<std::size_t>(x)],
                    static_cast<std::size_t>(n * bytes_of(storage(g, x))));
        return;
      }
      copy_tensor(buf[static_cast<std::size_t>(x)], storage(g, x), buf[static_cast<std::size_t>(y)],
                  storage(g, y), n);
      return;
    }
    case OpKind::collective:
    case OpKind::host: fail(op, "the cpu backend does not execute this kind");
    default: break;
  }
  prepare_in_place(op, g, buf);

  // The kernel's storage: that of the first input whose type the op's precision decides.
  std::optional<Storage> kernel;
  for (std::size_t i = 0; i < op.inputs.size() && !kernel; ++i)
    if (!fixed_storage(op.kind, false, i)) kernel = storage(g, op.inputs[i]);
  if (!kernel || !is_float(*kernel))
    fail(op, fmt::format("needs floating-point operands, got {}", kernel ? name_of(*kernel) : "none"));

  // Operands stored differently from what the kernel takes are converted into scratch.
  std::map<int, void*> staged;  // tensor id -> converted copy
  struct WriteBack {
    int id;
    void* data;
    Storage from;
  };
  std::vector<WriteBack> write_back;
  auto operand = [&](int id, Storage need, bool is_output) -> void* {
    void* real = buf[static_cast<std::size_t>(id)];
    const Storage have = storage(g, id);
    if (have == need) return real;
    if (!is_float(have) || !is_float(need))
      fail(op, fmt::format("tensor '{}' is {} where the op needs {}", g.tensor(id).name, name_of(have),
                           name_of(need)));
    const int64_t n = g.tensor(id).elements();
    auto it = staged.find(id);
    if (it == staged.end()) {
      void* p = scratch.get(static_cast<std::size_t>(n * bytes_of(need)));
      if (!is_output) convert(real, have, p, need, n);
      it = staged.emplace(id, p).first;
    }
    if (is_output) write_back.push_back({id, it->second, need});
    return it->second;
  };
  std::vector<void*> in, out;
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    in.push_back(operand(op.inputs[i], fixed_storage(op.kind, false, i).value_or(*kernel), false));
  for (std::size_t i = 0; i < op.outputs.size(); ++i)
    out.push_back(operand(op.outputs[i], fixed_storage(op.kind, true, i).value_or(*kernel), true));

  switch (*kernel) {
    case Storage::f32: run_typed<float>(op, g, in, out, rank); break;
    case Storage::bf16: run_typed<bf16>(op, g, in, out, rank); break;
    case Storage::f16: run_typed<half>(op, g, in, out, rank); break;
    default: break;
  }
  for (const WriteBack& w : write_back)
    convert(w.data, w.from, buf[static_cast<std::size_t>(w.id)], storage(g, w.id), g.tensor(w.id).elements());
}

}  // namespace perfsim::cpu
