// Kernel workspace sizes (see workspace.hpp). Each formula mirrors a scratch request of the
// CUDA backend (backends/cuda/cuda_op_exec.cpp, cuda_fp8_gemm.cpp) and the size function of
// the kernel it feeds (backends/cuda/kernels/*.cuh); tests/gpu/test_cuda_workspace.cpp checks
// that they agree, and the backend refuses to run a kernel whose workspace does not fit. A CPU
// profile gets the CPU backend's scratch instead (cpu_workspace; tests/backends/cpu/test_cpu_backend_graphs.cpp).
#include "core/cost/workspace.hpp"

#include <algorithm>
#include <map>

#include "core/cost/kernel_paths.hpp"
#include "core/graph/op_metrics.hpp"

namespace perfsim {

namespace {

// How a GPU backend stores a dtype (tf32 computes on fp32 storage).
enum class Storage { f32, bf16, f16, e4m3, i32, other };

Storage storage_of(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32: return Storage::f32;
    case DType::bf16: return Storage::bf16;
    case DType::fp16: return Storage::f16;
    case DType::fp8: return Storage::e4m3;
    case DType::int32: return Storage::i32;
    case DType::int8:
    case DType::int4: return Storage::other;
  }
  return Storage::other;
}

int64_t size_of(Storage s) {
  switch (s) {
    case Storage::f32:
    case Storage::i32: return 4;
    case Storage::bf16:
    case Storage::f16: return 2;
    case Storage::e4m3:
    case Storage::other: return 1;
  }
  return 1;
}

bool is_float(Storage s) { return s == Storage::f32 || s == Storage::bf16 || s == Storage::f16; }

Storage storage(const Graph& g, int id) { return storage_of(g.tensor(id).dtype); }

int64_t aligned(int64_t bytes) {
  return bytes <= 0 ? 0 : (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

struct GemmDims {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool broadcast_a = false, broadcast_b = false;
};

GemmDims gemm_dims(const Op& op, const Graph& g) {
  GemmDims d;
  d.batch = std::max<int64_t>(1, op.attrs.batch);
  d.m = op.attrs.m, d.n = op.attrs.n, d.k = op.attrs.k;
  d.broadcast_a = d.batch > 1 && g.tensor(op.inputs.at(0)).elements() == d.m * d.k;
  d.broadcast_b = d.batch > 1 && g.tensor(op.inputs.at(1)).elements() == d.k * d.n;
  return d;
}

// cuda_gemm.cpp GemmEngine::unsupported for float inputs of one type: whether cuBLASLt writes c.
bool gemm_writes(Storage in, Storage c) {
  if (!is_float(c)) return false;
  if (in == Storage::f32) return c == Storage::f32;
  return c == in || c == Storage::f32;
}

// run_gemm: A and B staged to the op's precision, C through fp32 when cuBLASLt cannot write it.
int64_t gemm_workspace(const Op& op, const Graph& g) {
  Storage in = storage_of(op.dtype);
  const int a = op.inputs.at(0), b = op.inputs.at(1), c = op.outputs.at(0);
  if (!is_float(in)) in = storage(g, a);
  int64_t total = 0;
  for (int id : {a, b})
    if (storage(g, id) != in) total += aligned(g.tensor(id).elements() * size_of(in));
  if (!gemm_writes(in, storage(g, c))) total += aligned(g.tensor(c).elements() * 4);
  return total;
}

// run_quantized_gemm (backends/cuda/cuda_quantized_gemm.cpp): W8A8 quantizes A's rows to int8
// (m·k bytes, m float scales) and takes the int32 product (m·n words); a weight-only GEMM the
// fused kernel takes needs none; any other dequantizes the weight into the op's float type and
// runs the float GEMM's path (the staged B that gemm_workspace plans is that copy).
int64_t quantized_gemm_workspace(const Op& op, const Graph& g) {
  const GemmDims d = gemm_dims(op, g);
  if (op.dtype == DType::int8) return aligned(d.m * d.k) + aligned(d.m * 4) + aligned(d.m * d.n * 4);
  if (quantized_gemv_takes(d.m, d.n, d.k, g.tensor(op.inputs.at(1)).quant_group)) return 0;
  return gemm_workspace(op, g);
}

// cuda_fp8_activation.cu: partials of the two-kernel quantizer, one float per block of
// 256 threads × 32 elements, at most 1024 blocks.
int64_t fp8_activation_workspace(int64_t n) {
  if (n <= fp8_single_block_elements) return 0;
  return std::clamp<int64_t>((n + 256 * 32 - 1) / (256 * 32), 1, 1024) * 4;
}

// run_fp8_gemm: 4 scale lines, then each operand not already e4m3 in the TN form is staged
// (n bytes of e4m3, plus the quantizer's partials for an untransposed float activation).
int64_t fp8_gemm_workspace(const Op& op, const Graph& g, const std::vector<char>& b_transposed) {
  const GemmDims d = gemm_dims(op, g);
  const int a = op.inputs.at(0), b = op.inputs.at(1);
  int64_t total = aligned(4 * 64 * 4);
  auto stage = [&](int id, int64_t n, bool transpose) {
    const Storage have = storage(g, id);
    if (have == Storage::e4m3 && !transpose) return;
    total += aligned(n);
    if (have != Storage::e4m3 && !transpose) total += aligned(fp8_activation_workspace(n));
  };
  stage(a, (d.broadcast_a ? 1 : d.batch) * d.m * d.k, op.attrs.trans_a);
  const bool b_ready = op.attrs.trans_b || b_transposed.at(static_cast<std::size_t>(b));
  stage(b, (d.broadcast_b ? 1 : d.batch) * d.k * d.n, !b_ready);
  return total;
}

// Operands whose storage the op's definition fixes.
bool fixed_storage(OpKind k, bool is_output, std::size_t i, Storage& out) {
  const std::optional<DType> t = fixed_operand_dtype(k, is_output, i);
  if (t) out = storage_of(*t);
  return t.has_value();
}

// Split-KV decode (kernels/decode_attention.cu): 4 CTAs per SM over batch × kv heads, splits
// of at least 64 kv positions, at most 256 splits; fp32 partials (d values, max, sum) per split.
int64_t decode_workspace(const OpAttrs& at, int sm_count) {
  const int64_t batch = std::max<int64_t>(1, at.batch);
  const int64_t kv_heads = at.kv_heads > 0 ? at.kv_heads : at.heads;
  const int64_t ctas = std::max<int64_t>(1, batch * kv_heads);
  const int64_t target = int64_t{std::max(sm_count, 1)} * 4;
  const int64_t by_grid = (target + ctas - 1) / ctas;
  const int64_t by_len = (at.seq_kv + 63) / 64;
  const int64_t splits = std::clamp<int64_t>(std::min(by_grid, by_len), 1, 256);
  return splits * batch * at.heads * at.seq_q * (at.head_dim + 2) * 4;
}

// The kernel's own workspace for float element size `elem` (run_typed in cuda_op_exec.cpp).
int64_t kernel_workspace(const Op& op, const Graph& g, int64_t elem, const Hardware& hw) {
  const OpAttrs& at = op.attrs;
  const int64_t batch = std::max<int64_t>(1, at.batch);
  const int64_t kv_heads = at.kv_heads > 0 ? at.kv_heads : at.heads;
  switch (op.kind) {
    case OpKind::attn_context_bwd:
    case OpKind::attn_scores_bwd: {
      // 16-bit storage with GQA: dK/dV summed over a group in fp32 (kernels/attn_matmul.cu).
      if (elem >= 4 || kv_heads <= 0 || at.heads / kv_heads <= 1) return 0;
      return g.tensor(op.outputs.at(1)).elements() * 4;  // [b, grad_capacity, Hkv, d] fp32
    }
    case OpKind::varlen_flash_attention: return 0;  // the varlen kernels keep no split-KV partials
    // A paged cache is always read by the split-KV kernel.
    case OpKind::paged_flash_attention: return decode_workspace(at, hw.sm_count);
    case OpKind::flash_attention:
      // Ring attention's blocks after the first never run the split-KV kernel (on some ranks
      // they skip query rows, which only the flash kernel does).
      return at.seq_q <= decode_kernel_max_seq_q && at.ring_step == 0 ? decode_workspace(at, hw.sm_count) : 0;
    case OpKind::flash_attention_bwd: {
      // dQ accumulators (rounded to 16 bytes) and D = rowsum(dO ⊙ O); where the tensor-core
      // kernel (16-bit storage, head_dim 64 or 128) splits a GQA group over CTAs, D rounded to
      // 16 bytes and fp32 dK, dV accumulators like the dK output (kernels/flash_attention.cuh).
      const int64_t dq = (batch * at.seq_q * at.heads * at.head_dim * 4 + 15) / 16 * 16;
      const int64_t delta = batch * at.heads * at.seq_q * 4;
      const bool split = flash_bwd_splits_gqa_group(elem, at.head_dim, at.heads, kv_heads);
      const int64_t dk = g.tensor(op.outputs.at(1)).elements();  // [b, grad_capacity, Hkv, d]
      if (!split || dk <= 0) return dq + delta;
      return dq + (delta + 15) / 16 * 16 + 2 * dk * 4;
    }
    case OpKind::rmsnorm_bwd:
    case OpKind::layernorm_bwd: {
      // dgamma and dbeta partial rows, one per block, min(rows, 512) blocks (kernels/norms.cuh).
      const Tensor& x = g.tensor(op.inputs.at(0));
      int64_t cols = at.cols, rows = at.rows;
      if (cols <= 0) cols = x.shape.empty() ? 1 : x.shape.back();
      if (rows <= 0) rows = x.elements() / std::max<int64_t>(cols, 1);
      const int64_t blocks = rows < 512 ? std::max<int64_t>(rows, 1) : 512;
      return 2 * blocks * cols * 4;
    }
    case OpKind::embedding_bwd: {
      // 16-bit tables are summed in an fp32 copy of dtable (and dpositions) (kernels/embedding.cuh).
      if (elem >= 4) return 0;
      int64_t floats = g.tensor(op.outputs.at(0)).elements();
      if (op.outputs.size() > 1) floats += g.tensor(op.outputs[1]).elements();
      return floats * 4;
    }
    default: return 0;
  }
}

// The storage the op's kernel computes in: that of its first input whose type the op's
// precision decides; false when there is none, or it is not a float (the backends refuse it).
bool kernel_storage(const Op& op, const Graph& g, Storage& kernel) {
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    Storage fixed{};
    if (!fixed_storage(op.kind, false, i, fixed)) {
      kernel = storage(g, op.inputs[i]);
      return is_float(kernel);
    }
  }
  return false;
}

// Converted copies of the operands stored in another type than the kernel's, one per tensor
// (both backends' generic op path), each rounded up to `align` bytes.
int64_t staging_bytes(const Op& op, const Graph& g, Storage kernel, int64_t align) {
  std::map<int, bool> staged;
  int64_t total = 0;
  auto operand = [&](int id, bool is_output, std::size_t i) {
    Storage need = kernel;
    (void)fixed_storage(op.kind, is_output, i, need);
    // An fp8 KV cache is read and written in place by the kernels of the fp8_kv pass's kinds.
    const Tensor& t = g.tensor(id);
    if (t.role == TensorRole::kv_cache && t.dtype == DType::fp8) return;
    if (storage(g, id) == need || staged.count(id) > 0) return;
    staged[id] = true;
    const int64_t bytes = g.tensor(id).elements() * size_of(need);
    total += (bytes + align - 1) / align * align;
  };
  for (std::size_t i = 0; i < op.inputs.size(); ++i) operand(op.inputs[i], false, i);
  for (std::size_t i = 0; i < op.outputs.size(); ++i) operand(op.outputs[i], true, i);
  return total;
}

// run_generic: converted copies of operands stored in another type than the kernel's
// (one per tensor), then the kernel's workspace.
int64_t generic_workspace(const Op& op, const Graph& g, const Hardware& hw) {
  Storage kernel = Storage::other;
  if (!kernel_storage(op, g, kernel)) return 0;  // the backend refuses such an op
  return staging_bytes(op, g, kernel, workspace_alignment) + aligned(kernel_workspace(op, g, size_of(kernel), hw));
}

// The CPU backend's scratch per op (backends/cpu/cpu_op_exec.cpp), exact bytes (its allocator
// counts what is asked): a GEMM with a 16-bit operand converts fp32 panels (cpu_gemm.cpp
// gemm_workspace_floats: blocks of 256 × 512 × 512, or all of A for at most 8 rows against a
// 16-bit B); other kernels stage operands stored in another type, as the generic path does.
int64_t cpu_workspace(const Op& op, const Graph& g) {
  constexpr int64_t block_m = 256, block_n = 512, block_k = 512, small_m = 8;
  switch (op.kind) {
    case OpKind::gemm: {
      Storage a = storage(g, op.inputs.at(0)), b = storage(g, op.inputs.at(1));
      const Storage c = storage(g, op.outputs.at(0));
      const GemmDims d = gemm_dims(op, g);
      // A quantized weight: up to 8 rows fused with the dequantization (A and C in fp32);
      // more, dequantized into fp32 first (K·N floats), and under W8A8 A's rows quantized
      // through fp32 (M·K more); the float GEMM's scratch follows.
      int64_t staged = 0;
      if (g.tensor(op.inputs.at(1)).quant_group > 0 && d.m <= quantized_fused_rows) return d.m * (d.k + d.n) * 4;  // fused
      if (g.tensor(op.inputs.at(1)).quant_group > 0) {
        staged = d.k * d.n * 4;
        b = Storage::f32;
        if (op.dtype == DType::int8) {
          staged += d.m * d.k * 4;
          a = Storage::f32;
        }
      }
      if (a == Storage::f32 && b == Storage::f32 && c == Storage::f32) return staged;
      if (d.m <= small_m && b != Storage::f32) return staged + d.m * d.k * 4;
      const int64_t m = std::min(d.m, block_m), n = std::min(d.n, block_n), k = std::min(d.k, block_k);
      return staged + (m * k + k * n + m * n) * 4;
    }
    case OpKind::adamw:
    case OpKind::copy:
    case OpKind::collective:
    case OpKind::host: return 0;
    default: {
      Storage kernel = Storage::other;
      return kernel_storage(op, g, kernel) ? staging_bytes(op, g, kernel, 1) : 0;
    }
  }
}

bool materialized_product(OpKind k) {
  return k == OpKind::attn_scores || k == OpKind::attn_context || k == OpKind::attn_context_bwd ||
         k == OpKind::attn_scores_bwd;
}

double workspace_with(const Op& op, const Graph& g, const Hardware& hw, const std::vector<char>& b_transposed) {
  if (hw.kind == "cpu") return static_cast<double>(cpu_workspace(op, g));
  switch (op.kind) {
    case OpKind::collective:
    case OpKind::host:
    case OpKind::adamw: return 0;  // fused descriptors are persistent (persistent_workspace)
    case OpKind::copy: {
      // A host transfer changing the type moves the bytes in the host tensor's type through
      // a device staging copy; device-to-device copies convert in place.
      const Tensor& x = g.tensor(op.inputs.at(0));
      const Tensor& y = g.tensor(op.outputs.at(0));
      if (!x.on_host() && !y.on_host()) return 0;
      const Tensor& host = x.on_host() ? x : y;
      const Tensor& dev = x.on_host() ? y : x;
      if (storage_of(host.dtype) == storage_of(dev.dtype)) return 0;
      return static_cast<double>(aligned(y.elements() * size_of(storage_of(host.dtype))));
    }
    case OpKind::gemm:
      if (g.tensor(op.inputs.at(1)).quant_group > 0) return static_cast<double>(quantized_gemm_workspace(op, g));
      return static_cast<double>(touches_fp8(op, g) ? fp8_gemm_workspace(op, g, b_transposed) : gemm_workspace(op, g));
    default: return static_cast<double>(generic_workspace(op, g, hw));
  }
}

}  // namespace

std::vector<char> fp8_b_stored_transposed(const Graph& g) {
  struct Layout {
    int64_t batch = 0, k = 0, n = 0;
  };
  std::vector<Layout> layout(g.tensors.size());
  std::vector<char> eligible(g.tensors.size(), 0), seen(g.tensors.size(), 0);
  for (const Tensor& t : g.tensors)
    eligible[static_cast<std::size_t>(t.id)] = is_persistent(t) && t.dtype == DType::fp8;
  for (const Op& op : g.ops) {
    for (int id : op.outputs) eligible[static_cast<std::size_t>(id)] = 0;  // written: the graph's layout
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      const auto id = static_cast<std::size_t>(op.inputs[i]);
      if (!eligible[id]) continue;
      if (op.kind != OpKind::gemm || i != 1) {
        eligible[id] = 0;
        continue;
      }
      const GemmDims d = gemm_dims(op, g);
      const Layout want{d.broadcast_b ? 1 : d.batch, d.k, d.n};
      const bool same = !seen[id] || (layout[id].batch == want.batch && layout[id].k == want.k && layout[id].n == want.n);
      if (op.attrs.trans_b || !same || want.batch * want.k * want.n != g.tensors[id].elements()) {
        eligible[id] = 0;
        continue;
      }
      layout[id] = want;
      seen[id] = 1;
    }
  }
  std::vector<char> out(g.tensors.size(), 0);
  for (std::size_t id = 0; id < out.size(); ++id) out[id] = static_cast<char>(eligible[id] && seen[id]);
  return out;
}

double workspace_bytes(const Op& op, const Graph& g, const Hardware& hw) {
  // The fp8 operand layouts matter only to a GPU's fp8 GEMMs.
  const bool fp8_gemm = hw.kind != "cpu" && touches_fp8(op, g);
  return workspace_with(op, g, hw, fp8_gemm ? fp8_b_stored_transposed(g) : std::vector<char>{});
}

std::vector<double> workspace_per_op(const Graph& g, const Hardware& hw) {
  std::vector<double> out(g.ops.size(), 0.0);
  const std::vector<char> b_transposed = hw.kind == "cpu" ? std::vector<char>{} : fp8_b_stored_transposed(g);
  for (std::size_t i = 0; i < g.ops.size(); ++i) out[i] = workspace_with(g.ops[i], g, hw, b_transposed);
  return out;
}

PersistentWorkspace persistent_workspace(const Graph& g, const Hardware& hw, bool scaled) {
  PersistentWorkspace p;
  if (hw.kind == "cpu") return p;
  auto times = [scaled](const Tensor& t) { return scaled ? static_cast<double>(t.count) : 1.0; };
  p.gemm_library = static_cast<double>(gemm_library_workspace);
  for (const Op& op : g.ops)
    if (materialized_product(op.kind)) p.attention_library = static_cast<double>(attention_library_workspace);
  for (const Tensor& t : g.tensors)
    if (t.dtype == DType::fp8) p.fp8_scales += times(t) * static_cast<double>(fp8_scale_slot_bytes);
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::adamw || op.attrs.passes > 1) continue;
    // Groups {param, grad, m, v} (+ weight after an fp32 master), as cpu::adamw_groups reads them.
    for (std::size_t i = 0; i < op.inputs.size();) {
      const Tensor& param = g.tensor(op.inputs[i]);
      p.adamw_descriptors += times(param) * static_cast<double>(adamw_descriptor_bytes);
      i += param.role == TensorRole::master_weight ? 5 : 4;
    }
  }
  return p;
}

}  // namespace perfsim
