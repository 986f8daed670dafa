// Precision passes: fp32 / bf16 / fp16 (whole-graph formats, with fp32 master weights for
// mixed-precision training), tf32 (GEMM compute mode), fp8 (linear-layer GEMMs), fp8_kv (the KV cache)
// and the weight formats of inference (int8/int4 weight-only, W8A8, 2:4 sparsity).
#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/graph/rewrite.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

namespace {

// AdamW groups are {param, grad, m, v} -> {param, m, v}, or with an fp32 master
// {master, grad, m, v, weight} -> {master, m, v, weight} (core/graph/op_kind.hpp).
bool has_master(const Graph& g, const Op& op) {
  return !op.inputs.empty() && g.tensor(op.inputs[0]).role == TensorRole::master_weight;
}

void add_master_weights(Graph& g, Op& op) {
  std::vector<int> in, out;
  for (std::size_t i = 0; i + 3 < op.inputs.size(); i += 4) {
    const int p = op.inputs[i], grad = op.inputs[i + 1], m = op.inputs[i + 2], v = op.inputs[i + 3];
    Tensor master = g.tensor(p);
    master.name += ".master";
    for (Shard& s : master.shard) s.of = master.name;  // a tensor-parallel part of the master copy
    master.role = TensorRole::master_weight;
    master.dtype = DType::fp32;
    const int mid = g.add_tensor(std::move(master));
    in.insert(in.end(), {mid, grad, m, v, p});
    out.insert(out.end(), {mid, m, v, p});
  }
  op.inputs = std::move(in);
  op.outputs = std::move(out);
}

void drop_master_weights(Op& op) {
  std::vector<int> in, out;
  for (std::size_t i = 0; i + 4 < op.inputs.size(); i += 5) {
    const int grad = op.inputs[i + 1], m = op.inputs[i + 2], v = op.inputs[i + 3],
              w = op.inputs[i + 4];
    in.insert(in.end(), {w, grad, m, v});
    out.insert(out.end(), {w, m, v});
  }
  op.inputs = std::move(in);
  op.outputs = std::move(out);
}

}  // namespace

void set_precision(Graph& g, DType t) {
  const bool training = is_training_graph(g);
  // A collective's stated payload is the bytes of the tensors it moves (ring attention's K and
  // V blocks together): it follows their precision. The bytes it touches, before the change.
  auto touched_bytes = [&g](const Op& op) {
    double b = 0;
    for (int id : op.inputs) b += g.tensor(id).bytes();
    for (int id : op.outputs) b += g.tensor(id).bytes();
    return b;
  };
  std::vector<double> touched(g.ops.size(), 0);
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == OpKind::collective && g.ops[i].attrs.payload_bytes > 0)
      touched[i] = touched_bytes(g.ops[i]);
  for (Op& op : g.ops) op.dtype = op.kind == OpKind::adamw ? DType::fp32 : t;
  for (Tensor& x : g.tensors) {
    switch (x.role) {
      case TensorRole::input: break;  // token ids keep their integer type
      case TensorRole::optimizer_state:
      case TensorRole::master_weight: x.dtype = DType::fp32; break;
      default: x.dtype = t;
    }
  }
  // A copy moves its data in the data's own type (token ids stay int32).
  for (Op& op : g.ops)
    if (op.kind == OpKind::copy) op.dtype = g.tensor(op.inputs.at(0)).dtype;
  // Outputs whose type the op fixes keep it (op_kind.hpp, fixed_operand_dtype): losses and
  // log-sum-exps stay fp32 for accuracy, routing weights fp32, expert ids and slots int32.
  for (const Op& op : g.ops)
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      if (const std::optional<DType> fixed = fixed_operand_dtype(op.kind, true, i))
        g.tensor(op.outputs[i]).dtype = *fixed;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (touched[i] > 0) g.ops[i].attrs.payload_bytes *= touched_bytes(g.ops[i]) / touched[i];
  if (!training) return;
  const bool mixed = t != DType::fp32;
  bool dropped = false;
  for (Op& op : g.ops) {
    if (op.kind != OpKind::adamw || has_master(g, op) == mixed) continue;
    if (mixed) {
      add_master_weights(g, op);
    } else {
      drop_master_weights(op);
      dropped = true;
    }
  }
  if (dropped) remove_unused_tensors(g);
}

void apply_tf32(Graph& g) {
  for (Op& op : g.ops)
    if (op.kind == OpKind::gemm && op.dtype == DType::fp32) op.dtype = DType::tf32;
}

namespace {

// By tensor id, the inputs (K) of the first GEMM that reads each weight only GEMMs read; 0 for
// every other tensor (a tied embedding table, also read by the lookup, keeps its format).
std::vector<int64_t> gemm_only_weights(const Graph& g) {
  std::vector<int64_t> k(g.tensors.size(), 0);
  std::vector<char> other(g.tensors.size(), 0);
  for (const Op& op : g.ops)
    for (int id : op.inputs) {
      const auto i = static_cast<std::size_t>(id);
      if (op.kind != OpKind::gemm) other[i] = 1;
      else if (k[i] == 0) k[i] = std::max<int64_t>(1, op.attrs.k);
    }
  for (const Tensor& x : g.tensors) {
    const auto i = static_cast<std::size_t>(x.id);
    if (x.role != TensorRole::weight || other[i]) k[i] = 0;
  }
  return k;
}

void refuse_training(const Graph& g, const char* pass) {
  if (is_training_graph(g))
    throw ConfigError(fmt::format("optimization '{}' rewrites trained weights: it applies to inference "
                                  "(prefill, decode, serving), not to a training step",
                                  pass));
}

// Tells each GEMM on a quantized weight its bits (OpAttrs::weight_bits).
void mark_quantized_gemms(Graph& g, int bits) {
  for (Op& op : g.ops)
    if (op.kind == OpKind::gemm && op.inputs.size() > 1 && g.tensor(op.inputs[1]).quant_group > 0)
      op.attrs.weight_bits = bits;
}

}  // namespace

void apply_fp8(Graph& g) {
  for (Op& op : g.ops)
    if (op.kind == OpKind::gemm) op.dtype = DType::fp8;
  if (is_training_graph(g)) return;  // training keeps weights in their precision
  // Inference: weights read only by GEMMs are stored in fp8.
  const std::vector<int64_t> k = gemm_only_weights(g);
  for (Tensor& x : g.tensors)
    if (k[static_cast<std::size_t>(x.id)] > 0) x.dtype = DType::fp8;
}

void apply_weight_only(Graph& g, int bits, int64_t group) {
  const char* pass = bits == 4 ? "int4_weights" : "int8_weights";
  refuse_training(g, pass);
  const std::vector<int64_t> k = gemm_only_weights(g);
  for (Tensor& x : g.tensors) {
    const int64_t inputs = k[static_cast<std::size_t>(x.id)];
    if (inputs == 0) continue;
    const int64_t per = group > 0 ? std::min(group, inputs) : inputs;
    if (inputs % per != 0)
      throw ConfigError(fmt::format("optimization '{}': groups of {} inputs do not divide the {} inputs of '{}'; "
                                    "give a group size that divides every linear layer's inputs (e.g. 128 or 64)",
                                    pass, per, inputs, x.name));
    x.dtype = bits == 4 ? DType::int4 : DType::int8;
    x.quant_group = per;
    x.quant_zeros = bits == 4;
  }
  mark_quantized_gemms(g, bits);
}

void apply_w8a8(Graph& g) {
  refuse_training(g, "w8a8");
  for (Op& op : g.ops)
    if (op.kind == OpKind::gemm) op.dtype = DType::int8;
  const std::vector<int64_t> k = gemm_only_weights(g);
  for (Tensor& x : g.tensors) {
    const int64_t inputs = k[static_cast<std::size_t>(x.id)];
    if (inputs == 0) continue;
    x.dtype = DType::int8;
    x.quant_group = inputs;
    x.quant_zeros = false;
  }
  mark_quantized_gemms(g, 8);
}

void apply_sparse_24(Graph& g) {
  refuse_training(g, "sparse_24");
  const std::vector<int64_t> k = gemm_only_weights(g);
  for (Tensor& x : g.tensors)
    if (k[static_cast<std::size_t>(x.id)] > 0) x.sparse_24 = true;
  for (Op& op : g.ops)
    if (op.kind == OpKind::gemm && op.inputs.size() > 1 && g.tensor(op.inputs[1]).sparse_24) op.attrs.sparse_24 = true;
}

void apply_fp8_kv(Graph& g) {
  std::vector<bool> cache(g.tensors.size(), false);
  bool any = false;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::kv_cache) cache[static_cast<std::size_t>(t.id)] = any = true;
  if (!any || is_training_graph(g))
    throw ConfigError("optimization 'fp8_kv' stores the KV cache in fp8, but this step has none (decode with "
                      "kv_cache, a prefill that fills a cache, or serving)");
  for (Op& op : g.ops) {
    bool touches = false;
    for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
      for (int id : *ids) touches = touches || cache[static_cast<std::size_t>(id)];
    if (!touches) continue;
    if (!appends_or_attends_kv(op.kind))
      throw ConfigError(fmt::format("optimization 'fp8_kv' needs 'flash_attention' earlier in the stack: op '{}' "
                                    "({}) reads the KV cache, and only the fused attention and the appends read "
                                    "and write fp8 rows",
                                    op.name, name_of(op.kind)));
    op.attrs.kv_scale = 1;
    op.attrs.kv_fp8 = true;
  }
  for (Tensor& t : g.tensors)
    if (cache[static_cast<std::size_t>(t.id)]) t.dtype = DType::fp8;
}

}  // namespace perfsim::passes
