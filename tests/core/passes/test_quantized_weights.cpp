// Weight formats of inference (int8_weights, int4_weights, w8a8, sparse_24): which tensors they
// store in which format, the bytes of their scales and indices, a 70B model's memory in int4
// against the hand-worked figure, and a sparse GEMM's rate.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/cost/calibration.hpp"
#include "core/cost/roofline.hpp"
#include "core/cost/workspace.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

Workload decode_w(int64_t prompt = 24) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 1, w.prompt = prompt, w.new_tokens = 8;
  return w;
}

Graph with(const ModelConfig& m, const Workload& w, const std::vector<PassSpec>& passes, int64_t layers = 2) {
  const std::vector<StackStep> stack{{"step", passes, ""}};
  return build_stack_graph(m, w, stack, 0, BuildOptions{layers});
}

double weight_bytes(const Graph& g) {
  double b = 0;
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::weight) b += t.bytes() * t.count;
  return b;
}

}  // namespace

TEST_CASE("quantized weights: a tensor's bytes hold its scales and zero points") {
  Tensor w;
  w.shape = {4096, 4096};
  w.dtype = DType::int4;
  w.quant_group = 128;
  w.quant_zeros = true;
  // 16,777,216 weights at half a byte, and 131,072 groups with a bf16 scale and a bf16 zero.
  CHECK(w.bytes() == 8388608.0 + 131072.0 * 4);
  w.dtype = DType::int8;
  w.quant_group = 4096;
  w.quant_zeros = false;
  // One bf16 scale per output channel.
  CHECK(w.bytes() == 16777216.0 + 4096.0 * 2);
}

TEST_CASE("quantized weights: the passes store GEMM-only weights and keep the rest") {
  const ModelConfig m = tiny_llama();
  for (const char* name : {"int8_weights", "int4_weights", "w8a8"}) {
    CAPTURE(name);
    const std::string pass = name;
    const Graph g = with(m, decode_w(), {PassSpec{"bf16"}, PassSpec{pass}});
    int gemms = 0;
    for (const Op& op : g.ops) {
      if (op.kind != OpKind::gemm) continue;
      ++gemms;
      // Weight-only formats compute in the activations' type; W8A8 in int8.
      CHECK(op.dtype == (pass == "w8a8" ? DType::int8 : DType::bf16));
      const Tensor& w = g.tensor(op.inputs.at(1));
      REQUIRE(w.role == TensorRole::weight);
      CHECK(w.dtype == (pass == "int4_weights" ? DType::int4 : DType::int8));
      // tiny-llama's GEMMs have K = 64 or 128 inputs: int4's groups of 128 are at most K.
      CHECK(w.quant_group == (pass == "int4_weights" ? std::min<int64_t>(128, op.attrs.k) : op.attrs.k));
      CHECK(w.quant_zeros == (pass == "int4_weights"));
    }
    CHECK(gemms > 0);
    // The embedding table is read by the lookup: it keeps bf16, as do the norms' weights.
    CHECK(g.tensors.front().dtype == DType::bf16);
    for (const Tensor& t : g.tensors)
      if (t.name.find("norm") != std::string::npos && t.role == TensorRole::weight) CHECK(t.dtype == DType::bf16);
  }
  // Groups of 32: four times the scales of groups of 128 on a 128-input GEMM.
  const Graph g32 = with(m, decode_w(), {PassSpec{"bf16"}, PassSpec{"int4_weights", 32.0}});
  for (const Op& op : g32.ops)
    if (op.kind == OpKind::gemm) CHECK(g32.tensor(op.inputs.at(1)).quant_group == std::min<int64_t>(32, op.attrs.k));
}

TEST_CASE("quantized weights: a training step is refused") {
  Workload w;
  w.phase = Phase::train;
  w.batch = 2, w.seq = 16;
  for (const char* name : {"int8_weights", "int4_weights", "w8a8"}) {
    CAPTURE(name);
    try {
      (void)with(tiny_llama(), w, {PassSpec{"bf16"}, PassSpec{name}});
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find("applies to inference") != std::string::npos);
    }
  }
}

TEST_CASE("quantized weights: Llama-3-70B in int4 fits one 80 GB GPU with room for its KV cache") {
  const ModelConfig m = llama("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192);
  const Graph bf16 = with(m, decode_w(8192), {PassSpec{"bf16"}, PassSpec{"kv_cache"}}, 80);
  const Graph int4 = with(m, decode_w(8192), {PassSpec{"bf16"}, PassSpec{"kv_cache"}, PassSpec{"int4_weights"}}, 80);
  // By hand: each layer's GEMM weights, q and o 8192², k and v 8192 × 1024, the MLP 3 × 8192 ×
  // 28672: 855,638,016; 80 layers and the untied head (128,256 × 8192 = 1,050,673,152):
  // 69,501,714,432 GEMM weights at 0.5 B plus a 4 B scale and zero per 128: 0.53125 B each,
  // 36,922,785,792 B. The embedding table (2,101,346,304 B) and the 161 norms (2,637,824 B)
  // stay bf16.
  const double gemm_weights = 80.0 * (2 * 8192.0 * 8192 + 2 * 8192.0 * 1024 + 3 * 8192.0 * 28672) + 128256.0 * 8192;
  CHECK(gemm_weights == 69501714432.0);
  const double by_hand = gemm_weights * 0.53125 + 128256.0 * 8192 * 2 + 161 * 8192.0 * 2;
  CHECK(weight_bytes(int4) == approx(by_hand).epsilon(1e-9));
  // bf16: 141 GB of weights alone, which no 80 GB GPU holds; int4 leaves over 40 GB for KV.
  CHECK(weight_bytes(bf16) > 140e9);
  const MemoryBreakdown mem = predict_memory(int4);
  CHECK(mem.peak < 80e9);
  CHECK(80e9 - weight_bytes(int4) > 40e9);
}

TEST_CASE("2:4 sparsity: half the values with 2-bit indices, GEMMs at the sparse peak, predicted only") {
  Tensor w;
  w.shape = {4096, 4096};
  w.dtype = DType::bf16;
  w.sparse_24 = true;
  // 8,388,608 kept bf16 values and as many 2-bit indices.
  CHECK(w.bytes() == 8388608.0 * 2 + 8388608.0 / 4);

  const Graph g = with(tiny_llama(), decode_w(), {PassSpec{"bf16"}, PassSpec{"sparse_24"}});
  int sparse = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::gemm) {
      CHECK(op.attrs.sparse_24 == g.tensor(op.inputs.at(1)).sparse_24);
      sparse += op.attrs.sparse_24 ? 1 : 0;
    }
  CHECK(sparse > 0);
  CHECK(!g.tensors.front().sparse_24);  // the embedding table

  // A compute-bound GEMM (4096³ in bf16): twice the rate on sparse tensor cores, the dense
  // rate without them; its bytes and FLOPs are the same.
  Hardware hw = h100_node();
  Op op;
  op.kind = OpKind::gemm;
  op.dtype = DType::bf16;
  op.attrs.m = op.attrs.n = op.attrs.k = 4096;
  const double flops = 2.0 * 4096 * 4096 * 4096, bytes = 3.0 * 4096 * 4096 * 2;
  const OpCost dense = roofline_cost(op, flops, bytes, hw, false);
  op.attrs.sparse_24 = true;
  hw.sparse_speedup = 2;
  const OpCost on_sparse = roofline_cost(op, flops, bytes, hw, false);
  REQUIRE(dense.compute_bound);
  CHECK(on_sparse.compute_time == approx(dense.compute_time / 2).epsilon(1e-12));
  CHECK(on_sparse.flops == dense.flops);
  hw.sparse_speedup = 1;
  CHECK(roofline_cost(op, flops, bytes, hw, false).compute_time == approx(dense.compute_time).epsilon(1e-12));
}

TEST_CASE("quantized weights: GEMMs on them are priced from curves of their own kernels") {
  const ModelConfig m = tiny_llama();
  Workload w = decode_w();
  w.batch = 3;
  const Graph g4 = with(m, w, {PassSpec{"bf16"}, PassSpec{"int4_weights"}});
  const Graph w8 = with(m, w, {PassSpec{"bf16"}, PassSpec{"w8a8"}});
  Workload p;
  p.phase = Phase::prefill;
  p.batch = 2, p.prompt = 16;
  const Graph g8 = with(m, p, {PassSpec{"bf16"}, PassSpec{"int8_weights"}});
  auto first_gemm = [](const Graph& g) -> const Op& {
    for (const Op& op : g.ops)
      if (op.kind == OpKind::gemm) return op;
    throw std::logic_error("no gemm");
  };
  // Three decode rows: the fused kernel's 4-row instantiation, pooled under "int4w".
  const Op& d = first_gemm(g4);
  CHECK(d.attrs.weight_bits == 4);
  CHECK(calibration_variant(d) == "int4w");
  CHECK(finer_calibration_variant(d) == "int4w_r4");
  // 32 prompt rows dequantize first; W8A8 computes in int8 (its key's dtype), no variant.
  const Op& pre = first_gemm(g8);
  CHECK(pre.attrs.weight_bits == 8);
  CHECK(calibration_variant(pre) == "int8w_dq");
  CHECK(finer_calibration_variant(pre).empty());
  const Op& a8 = first_gemm(w8);
  CHECK(a8.dtype == DType::int8);
  CHECK(calibration_variant(a8).empty());
  CHECK(is_calibration_variant("int4w_r8"));
  CHECK_FALSE(is_calibration_variant("int4w_r3"));
}

TEST_CASE("quantized weights: the CUDA workspace of their GEMMs, by path") {
  // A decode's fused GEMV needs none; W8A8 m·k int8 codes, m row scales and the m·n int32
  // product, each rounded up to the workspace alignment; a prompt dequantizes the [K, N] weight
  // into bf16 first.
  const Hardware hw = h100_node();
  const ModelConfig m = tiny_llama();
  const Graph fused = with(m, decode_w(), {PassSpec{"bf16"}, PassSpec{"int4_weights"}});
  const Graph w8 = with(m, decode_w(), {PassSpec{"bf16"}, PassSpec{"w8a8"}});
  Workload p;
  p.phase = Phase::prefill;
  p.batch = 2, p.prompt = 16;
  const Graph dq = with(m, p, {PassSpec{"bf16"}, PassSpec{"int4_weights"}});
  auto gemm_workspace = [&](const Graph& g, const char* name) {
    for (const Op& op : g.ops)
      if (op.name == name) return workspace_bytes(op, g, hw);
    throw std::logic_error(name);
  };
  CHECK(gemm_workspace(fused, "layer0.mlp.gate_proj") == 0);
  const auto align = [](double b) { return std::ceil(b / workspace_alignment) * workspace_alignment; };
  // gate_proj of tiny-llama: k = 64 inputs, n = 128 outputs, one decode row.
  CHECK(gemm_workspace(w8, "layer0.mlp.gate_proj") == align(1 * 64) + align(1 * 4) + align(1 * 128 * 4));
  CHECK(gemm_workspace(dq, "layer0.mlp.gate_proj") == align(64 * 128 * 2));
}
