// Op dispatch on the GPU (see cuda_op_exec.hpp): support checks, workspaces, and the ops with
// their own path (host copies, GEMMs, AdamW). The other kinds go through run_generic
// (cuda_op_kernels.cpp).
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/cuda/cuda_op_util.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "backends/ops/op_shapes.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_fp8_activation.hpp"
#include "backends/cuda/cuda_kernel_table.hpp"
#include "backends/cuda/cuda_quantized_gemm.hpp"
#include "backends/cuda/stream_wait.hpp"
#include "core/cost/workspace.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"

#include "backends/cuda/kernels/adamw.cuh"
#include "backends/cuda/kernels/attention_materialized.cuh"
#include "backends/cuda/kernels/memory_ops.cuh"
#include "backends/cuda/kernels/moe.cuh"

namespace perfsim::cuda {

// core/cost/workspace.hpp mirrors these sizes; the compiler checks the ones that are constants.
static_assert(GemmEngine::workspace_bytes == static_cast<std::size_t>(gemm_library_workspace));
static_assert(BlasHandle::workspace_bytes == static_cast<std::size_t>(attention_library_workspace));
static_assert(fp8_single_block_max == fp8_single_block_elements);
static_assert(sizeof(AdamWDeviceGroup) == static_cast<std::size_t>(adamw_descriptor_bytes));

namespace op_detail {

[[noreturn]] void fail(const Op& op, const std::string& what) {
  throw NotExecutable(fmt::format("cuda backend: op '{}' ({}): {}", op.name, name_of(op.kind), what));
}

Elem elem(const Graph& g, int id) { return elem_of(g.tensor(id).dtype); }
bool is_float(Elem e) { return e == Elem::f32 || e == Elem::bf16 || e == Elem::f16; }

// Operands whose storage is fixed by the op's definition rather than by its precision.
std::optional<Elem> fixed_elem(OpKind k, bool is_output, std::size_t i) {
  if (const std::optional<DType> t = fixed_operand_dtype(k, is_output, i)) return elem_of(*t);
  return std::nullopt;
}

bool fp8_kv_cache(const Graph& g, int id) {
  const Tensor& t = g.tensor(id);
  return t.role == TensorRole::kv_cache && elem_of(t.dtype) == Elem::e4m3;
}

}  // namespace op_detail

using op_detail::elem;
using op_detail::fail;
using op_detail::fixed_elem;
using op_detail::fp8_kv_cache;
using op_detail::is_float;

namespace {

// Why op cannot run over its fp8 operands as an op on an fp8 KV cache (the fp8_kv pass), or ""
// when it can: the appends write the cache from any float type and the three flash kinds read
// it (K and V alike) under bf16/fp16 attention, all in place; no other kind, fp8 operand or
// precision has a kernel.
std::string fp8_kv_unsupported_reason(const Op& op, const Graph& g) {
  bool attention = false;
  switch (op.kind) {
    case OpKind::flash_attention:
    case OpKind::paged_flash_attention:
    case OpKind::varlen_flash_attention: attention = true; break;
    case OpKind::kv_append:
    case OpKind::paged_kv_append:
    case OpKind::varlen_kv_append: break;
    default:
      return fmt::format("cuda backend has no fp8 {} kernel (fp8 is a GEMM precision or a KV cache's)",
                         name_of(op.kind));
  }
  for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
    for (int id : *ids)
      if (elem(g, id) == Elem::e4m3 && !fp8_kv_cache(g, id))
        return fmt::format("cuda backend: {} '{}' takes fp8 tensor '{}', which is not a KV cache (only the cache may "
                           "be fp8 there)",
                           name_of(op.kind), op.name, g.tensor(id).name);
  if (!(op.attrs.kv_scale > 0))
    return fmt::format("cuda backend: '{}' has an fp8 KV cache but kv_scale {} (needs > 0)", op.name,
                       op.attrs.kv_scale);
  if (!attention) return {};
  // Inputs q, k, v first (op_io.hpp): one KvStorage holds for both caches.
  if (op.inputs.size() < 3 || elem(g, op.inputs[1]) != Elem::e4m3 || elem(g, op.inputs[2]) != Elem::e4m3)
    return fmt::format("cuda backend: attention '{}' reads an fp8 cache only with K and V both fp8", op.name);
  if (const Tensor& q = g.tensor(op.inputs[0]); elem(g, q.id) != Elem::bf16 && elem(g, q.id) != Elem::f16)
    return fmt::format("cuda backend reads an fp8 KV cache in bf16 or fp16 attention only ('{}' computes in {})",
                       op.name, name_of(q.dtype));
  return {};
}

}  // namespace

std::string op_unsupported_reason(const Op& op, const Graph& g) {
  if (op.kind == OpKind::copy && op.inputs.size() == 1 && op.outputs.size() == 1) {
    const Tensor& x = g.tensor(op.inputs[0]);
    const Tensor& y = g.tensor(op.outputs[0]);
    if (x.on_host() && y.on_host())
      return fmt::format("cuda backend: copy '{}' is between two host tensors (nothing for the GPU to do)", op.name);
    if ((x.on_host() || y.on_host()) && elem(g, x.id) != elem(g, y.id) &&
        !(is_float(elem(g, x.id)) && is_float(elem(g, y.id))))
      return fmt::format("cuda backend: copy '{}' cannot convert {} to {}", op.name, name_of(x.dtype), name_of(y.dtype));
    if (g.graphed && !pageable_copies_capturable &&
        (x.residence == Residence::host_pageable || y.residence == Residence::host_pageable))
      return fmt::format("{} (op '{}')", pageable_capture_message, op.name);
  }
  if (op.attrs.alibi_heads > 0) return fmt::format("cuda backend: '{}' has no GPU kernel for ALiBi yet", op.name);
  if (op.kind != OpKind::collective && op.kind != OpKind::host && !OpExecutor::runs(op.kind))
    return fmt::format("cuda backend has no {} kernel", name_of(op.kind));
  if (op.kind == OpKind::collective)
    return "cuda backend runs one GPU for now: collectives (NCCL, several GPUs) are not executed yet";
  if (op.kind == OpKind::host)
    return fmt::format("cuda backend does not run host ops ('{}'): they have no kernel to time", op.name);
  if (std::string why = quantized_gemm_unsupported_reason(op, g); !why.empty()) return why;
  for (int id : op.inputs)
    if (elem(g, id) == Elem::unsupported && !(op.kind == OpKind::gemm && g.tensor(id).quant_group > 0))
      return fmt::format("cuda backend cannot hold {} tensor '{}'", name_of(g.tensor(id).dtype), g.tensor(id).name);
  for (int id : op.outputs)
    if (elem(g, id) == Elem::unsupported)
      return fmt::format("cuda backend cannot hold {} tensor '{}'", name_of(g.tensor(id).dtype), g.tensor(id).name);
  // Varlen attention runs any head_dim up to 256 (the decodes' split kernel takes 32, 64, 128 or
  // 256, a simple kernel the rest).
  if (op.kind == OpKind::varlen_flash_attention && !(op.attrs.head_dim >= 1 && op.attrs.head_dim <= 256))
    return fmt::format("cuda backend: varlen attention '{}' needs head_dim 1..256 (has {})", op.name,
                       op.attrs.head_dim);
  if (op.kind == OpKind::paged_flash_attention &&
      !(op.attrs.head_dim == 32 || op.attrs.head_dim == 64 || op.attrs.head_dim == 128 || op.attrs.head_dim == 256))
    return fmt::format("cuda backend: paged attention '{}' needs head_dim 32, 64, 128 or 256 (has {})", op.name,
                       op.attrs.head_dim);
  if ((op.kind == OpKind::moe_route &&
       (op.attrs.experts > moe_route_max_experts || op.attrs.top_k > moe_route_max_top_k)) ||
      (op.kind == OpKind::moe_route_bwd && op.attrs.top_k > moe_route_max_top_k))
    return fmt::format("cuda backend: router '{}' takes at most {} experts and top_k {} (has {} and {})", op.name,
                       moe_route_max_experts, moe_route_max_top_k, op.attrs.experts, op.attrs.top_k);
  if (touches_fp8(op, g) && op.kind != OpKind::gemm) return fp8_kv_unsupported_reason(op, g);
  if (touches_fp8(op, g)) {
    if (elem(g, op.outputs.at(0)) == Elem::e4m3) return "cuda backend: fp8 gemm writes bf16/fp16/fp32, not fp8";
    try {
      ops::GemmShape s = ops::gemm_shape(op, g);
      s.trans_a = false, s.trans_b = true;  // the runner stages operands into the TN form
      if (std::string why = GemmEngine::unsupported(Elem::e4m3, Elem::e4m3, elem(g, op.outputs[0]), s); !why.empty())
        return why;
    } catch (const NotExecutable& e) {
      return e.what();
    }
  }
  return {};
}

std::unique_ptr<BlasHandle> OpExecutor::make_attention_blas(const Graph& g) {
  for (const Op& op : g.ops)
    if (op.kind == OpKind::attn_scores || op.kind == OpKind::attn_context || op.kind == OpKind::attn_context_bwd ||
        op.kind == OpKind::attn_scores_bwd)
      return std::make_unique<BlasHandle>();
  return nullptr;
}

OpExecutor::OpExecutor(const Graph& g, CachingAllocator& alloc, GemmEngine& gemm, cudaStream_t stream,
                       NcclRanks* ranks)
    : m_graph(g), m_alloc(alloc), m_gemm(gemm), m_stream(stream), m_fp8_storage(fp8_storage(g)),
      m_ranks(ranks), m_blas(make_attention_blas(g)) {
  int dev = 0;
  PERFSIM_CUDA_CHECK(cudaGetDevice(&dev));
  const std::vector<double> planned = workspace_per_op(g, device_profile(dev));
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (planned[i] > 0) m_ws_planned[g.ops[i].id] = static_cast<std::size_t>(planned[i]);
  if (m_blas != nullptr) m_alloc.count_external(BlasHandle::workspace_bytes, TensorRole::workspace);
  // Fused AdamW descriptors live all step (persistent_workspace): allocated here, filled at
  // the first eager run.
  try {
    for (const Op& op : g.ops) {
      if (op.kind != OpKind::adamw || op.attrs.passes > 1) continue;
      const auto groups = static_cast<int64_t>(ops::adamw_groups(op, g).size());
      m_adamw_desc[op.id].device =
          m_alloc.allocate(static_cast<std::size_t>(adamw_workspace_bytes(groups)), TensorRole::workspace);
    }
  } catch (...) {
    for (auto& [id, d] : m_adamw_desc) m_alloc.release(d.device);
    if (m_blas != nullptr) m_alloc.uncount_external(BlasHandle::workspace_bytes, TensorRole::workspace);
    throw;
  }
}

OpExecutor::~OpExecutor() {
  for (auto& [id, d] : m_adamw_desc) m_alloc.release(d.device);
  if (m_ws_block != nullptr) m_alloc.release(m_ws_block);
  for (void* p : m_extra) m_alloc.release(p);
  for (void* p : m_held_scratch) m_alloc.release(p);
  if (m_blas != nullptr) m_alloc.uncount_external(BlasHandle::workspace_bytes, TensorRole::workspace);
}

void OpExecutor::begin_workspace(const Op& op) {
  const auto it = m_ws_planned.find(op.id);
  m_ws_size = it == m_ws_planned.end() ? 0 : it->second;
  m_ws_used = 0;
  m_ws_block = m_ws_size > 0 ? m_alloc.allocate(m_ws_size, TensorRole::workspace) : nullptr;
}

void OpExecutor::end_workspace(const Op& op, bool hold) {
  if (m_ws_used != m_ws_size)
    m_ws_mismatches.push_back(fmt::format("{}: used {} of {} planned bytes", op.name, m_ws_used, m_ws_size));
  if (m_ws_block != nullptr) {
    if (hold) m_held_scratch.push_back(m_ws_block);
    else m_alloc.release(m_ws_block);
  }
  for (void* p : m_extra) {
    if (hold) m_held_scratch.push_back(p);
    else m_alloc.release(p);
  }
  m_extra.clear();
  m_ws_block = nullptr;
  m_ws_size = m_ws_used = 0;
}

void* OpExecutor::scratch(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const auto align = static_cast<std::size_t>(workspace_alignment);
  const std::size_t take = (bytes + align - 1) / align * align;
  if (m_ws_used + take > m_ws_size)
    throw std::logic_error(fmt::format(
        "cuda backend: the kernels need more workspace than core/cost/workspace.cpp plans ({} bytes more than the "
        "{} planned); the mirror of a kernel's workspace size is out of date",
        m_ws_used + take - m_ws_size, m_ws_size));
  void* p = static_cast<char*>(m_ws_block) + m_ws_used;
  m_ws_used += take;
  return p;
}

void* OpExecutor::scratch_or_extra(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const auto align = static_cast<std::size_t>(workspace_alignment);
  if (m_ws_used + (bytes + align - 1) / align * align <= m_ws_size) return scratch(bytes);
  m_extra.reserve(m_extra.size() + 1);  // no allocation between taking the block and noting it
  void* p = m_alloc.allocate(bytes, TensorRole::workspace);
  m_extra.push_back(p);
  return p;
}

void OpExecutor::copy_if_distinct(const std::vector<void*>& buf, int from, int to) {
  if (from == to) return;
  const Graph& g = m_graph;
  convert(buf[static_cast<std::size_t>(from)], elem(g, from), buf[static_cast<std::size_t>(to)], elem(g, to),
          g.tensor(to).elements(), m_stream);
}

void OpExecutor::release_held_scratch() {
  for (void* p : m_held_scratch) m_alloc.release(p);
  m_held_scratch.clear();
}

void OpExecutor::run(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales,
                     bool capturing, cudaStream_t stream, bool hold_scratch) {
  m_stream = stream;
  begin_workspace(op);
  auto done = [&] { end_workspace(op, hold_scratch); };
  try {
    if (const OwnPath own = own_paths().find(op.kind)) (this->*own)(op, buf, scales, capturing);
    else run_generic(op, buf);
  } catch (...) {
    done();
    throw;
  }
  done();
}

const ops::KernelTable<OpExecutor::OwnPath>& OpExecutor::own_paths() {
  static const ops::KernelTable<OwnPath> table{
      {OpKind::gemm, &OpExecutor::run_any_gemm},
      {OpKind::adamw, &OpExecutor::run_adamw},
      {OpKind::copy, &OpExecutor::run_copy},
  };
  return table;
}

bool OpExecutor::runs(OpKind k) { return own_paths().has(k) || typed_kernels<float>().has(k); }

void OpExecutor::run_any_gemm(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales, bool) {
  if (op.inputs.size() > 1 && m_graph.tensor(op.inputs[1]).quant_group > 0) run_quantized_gemm(op, buf);
  else if (touches_fp8(op, m_graph)) run_fp8_gemm(op, buf, scales);
  else run_gemm(op, buf, scales);
}

void OpExecutor::run_copy(const Op& op, const std::vector<void*>& buf, const std::vector<float*>&, bool capturing) {
  const ops::CopyIds id = ops::copy_ids(op);
  if (m_graph.tensor(id.x).on_host() || m_graph.tensor(id.y).on_host()) run_host_copy(op, buf, capturing);
  else run_device_copy(op, buf);
}

// Upload (host x -> device y) or download (device x -> host y) on the op's stream. Equal
// element types move the bytes straight; otherwise the bytes travel in the host tensor's type
// through a device scratch converted on the GPU (transient activation memory, as staging is
// elsewhere). A pageable side makes the copy synchronous for the host (the driver stages it
// through its own pinned buffer); a pinned one is a DMA asynchronous to the host.
void OpExecutor::run_host_copy(const Op& op, const std::vector<void*>& buf, bool capturing) {
  const Graph& g = m_graph;
  const int x = op.inputs[0], y = op.outputs[0];
  const bool upload = g.tensor(x).on_host();
  const int host_id = upload ? x : y, dev_id = upload ? y : x;
  const Elem he = elem(g, host_id), de = elem(g, dev_id);
  const int64_t n = g.tensor(y).elements();
  const std::size_t bytes = static_cast<std::size_t>(n) * static_cast<std::size_t>(bytes_of(he));
  void* host = buf[static_cast<std::size_t>(host_id)];
  void* dev = buf[static_cast<std::size_t>(dev_id)];
  void* staged = he == de ? dev : scratch(bytes);  // [n] in the host tensor's type
  if (!upload && staged != dev) convert(dev, de, staged, he, n, m_stream);
  const cudaError_t e = upload ? cudaMemcpyAsync(staged, host, bytes, cudaMemcpyHostToDevice, m_stream)
                               : cudaMemcpyAsync(host, staged, bytes, cudaMemcpyDeviceToHost, m_stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (capturing && g.tensor(host_id).residence == Residence::host_pageable)
      fail(op, fmt::format("{} ({})", pageable_capture_message, cudaGetErrorString(e)));
    throw_cuda_status(e, upload ? "cudaMemcpyAsync(host to device)" : "cudaMemcpyAsync(device to host)", __FILE__,
                      __LINE__);
  }
  if (upload && staged != dev) convert(staged, he, dev, de, n, m_stream);
}

void OpExecutor::run_gemm(const Op& op, const std::vector<void*>& buf, const std::vector<float*>&) {
  if (ops::gemm_shape(op, m_graph).accumulate) copy_if_distinct(buf, op.inputs[2], op.outputs[0]);
  run_float_gemm(op, buf, std::nullopt);
}

void OpExecutor::run_float_gemm(const Op& op, const std::vector<void*>& buf, const std::optional<GemmOperand>& b_ready) {
  const Graph& g = m_graph;
  const ops::GemmShape s = ops::gemm_shape(op, g);
  const int a = op.inputs[0], b = op.inputs[1], c = op.outputs[0];
  const bool tf32 = op.dtype == DType::tf32;
  Elem in = elem_of(op.dtype);
  if (!is_float(in)) in = elem(g, a);
  auto staged_input = [&](int id) -> GemmOperand {
    void* p = buf[static_cast<std::size_t>(id)];
    const Elem have = elem(g, id);
    if (have == in) return {p, in, nullptr};
    const int64_t n = g.tensor(id).elements();
    void* q = scratch(static_cast<std::size_t>(n) * static_cast<std::size_t>(bytes_of(in)));
    convert(p, have, q, in, n, m_stream);
    return {q, in, nullptr};
  };
  const GemmOperand ga = staged_input(a), gb = b_ready ? *b_ready : staged_input(b);
  // C in its own storage when cuBLASLt writes it, else through an fp32 copy.
  const Elem c_have = elem(g, c);
  const Elem c_kernel = GemmEngine::unsupported(in, in, c_have, s).empty() ? c_have : Elem::f32;
  void* c_ptr = buf[static_cast<std::size_t>(c)];
  const int64_t c_n = g.tensor(c).elements();
  if (c_kernel != c_have) {
    void* staged = scratch(static_cast<std::size_t>(c_n) * sizeof(float));
    if (s.accumulate) convert(c_ptr, c_have, staged, c_kernel, c_n, m_stream);
    m_gemm.gemm(ga, gb, staged, c_kernel, s, tf32, m_stream);
    convert(staged, c_kernel, c_ptr, c_have, c_n, m_stream);
    return;
  }
  m_gemm.gemm(ga, gb, c_ptr, c_kernel, s, tf32, m_stream);
}

// run_fp8_gemm: cuda_fp8_gemm.cpp

void OpExecutor::run_adamw(const Op& op, const std::vector<void*>& buf, const std::vector<float*>&, bool capturing) {
  const Graph& g = m_graph;
  std::vector<ops::AdamWGroup> groups;
  auto ptr = [&](int id) { return buf[static_cast<std::size_t>(id)]; };
  for (const ops::AdamWGroupIds& ids : ops::adamw_groups(op, g)) {
    copy_if_distinct(buf, ids.param, ids.param_out);
    copy_if_distinct(buf, ids.m, ids.m_out);
    copy_if_distinct(buf, ids.v, ids.v_out);
    ops::AdamWGroup gr;
    gr.param = ptr(ids.param_out), gr.param_type = storage_of(elem(g, ids.param_out));
    gr.grad = ptr(ids.grad), gr.grad_type = storage_of(elem(g, ids.grad));
    gr.m = ptr(ids.m_out), gr.m_type = storage_of(elem(g, ids.m_out));
    gr.v = ptr(ids.v_out), gr.v_type = storage_of(elem(g, ids.v_out));
    if (ids.weight_out >= 0) gr.weight = ptr(ids.weight_out), gr.weight_type = storage_of(elem(g, ids.weight_out));
    gr.n = g.tensor(ids.param).elements();
    for (host::Storage t : {gr.param_type, gr.grad_type, gr.m_type, gr.v_type})
      if (t != host::Storage::f32 && t != host::Storage::bf16 && t != host::Storage::f16)
        fail(op, fmt::format("AdamW tensors must be floating point, got {}", host::name_of(t)));
    groups.push_back(gr);
  }
  const ops::AdamWParams params = ops::adamw_params(op);
  if (op.attrs.passes > 1) {
    adamw_unfused(groups, params, op.attrs.passes, m_stream);
    return;
  }
  // Fused: one launch reading descriptors from device memory, uploaded when they change
  // (the first eager run); a capture must find them in place.
  const std::vector<AdamWDeviceGroup> desc = adamw_descriptors(groups);
  const auto bytes = static_cast<std::size_t>(adamw_workspace_bytes(static_cast<int64_t>(desc.size())));
  UploadedDescriptors& up = m_adamw_desc[op.id];
  const auto* raw = reinterpret_cast<const unsigned char*>(desc.data());
  if (up.host.size() != bytes || std::memcmp(up.host.data(), raw, bytes) != 0) {
    if (capturing) fail(op, "AdamW descriptors changed during CUDA graph capture (run once eagerly first)");
    // The buffer was sized for these groups when the executor was made (persistent workspace).
    if (up.device == nullptr || (!up.host.empty() && up.host.size() != bytes))
      throw std::logic_error(fmt::format("cuda backend: AdamW '{}' has no descriptor buffer of {} bytes", op.name, bytes));
    wait_stream(m_stream, m_ranks);  // a previous launch may still read them
    PERFSIM_CUDA_CHECK(cudaMemcpy(up.device, raw, bytes, cudaMemcpyHostToDevice));
    up.host.assign(raw, raw + bytes);
  }
  adamw_fused(static_cast<const AdamWDeviceGroup*>(up.device), static_cast<int64_t>(desc.size()),
              adamw_total_chunks(desc), params, m_stream);
}

}  // namespace perfsim::cuda
