// Calibration tables: log-space interpolation on hand-checkable points, the cost model
// pricing ops from them, and profiles written as Lua and loaded back.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/calibration.hpp"
#include "core/cost_model.hpp"
#include "core/errors.hpp"
#include "core/passes.hpp"
#include "core/roofline.hpp"
#include "dsl/dsl.hpp"
#include "graph_test_models.hpp"
#include "approx.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

Hardware bare_gpu() {
  Hardware hw;
  hw.name = "test-gpu";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 50e12;
  hw.peak_flops[static_cast<int>(DType::bf16)] = 1000e12;
  hw.memory_bytes = 80e9;
  hw.memory_bandwidth = 2e12;
  hw.launch_eager = 5e-6;
  hw.launch_graph = 1e-6;
  for (OpClass c : all_op_classes) {
    hw.compute_efficiency[c] = 1.0;
    hw.memory_efficiency[c] = 1.0;
  }
  return hw;
}

// A 2x2x2 grid whose efficiencies are 0.1 · 2^(i+j+l): the corners span 0.1 .. 0.8.
GemmTable corner_table() {
  GemmTable t;
  t.m = {1, 4};
  t.n = {100, 400};
  t.k = {100, 400};
  t.efficiency.resize(8);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t l = 0; l < 2; ++l) t.cell(i, j, l) = 0.1 * std::pow(2.0, double(i + j + l));
  return t;
}

Graph one_op_graph(OpKind kind, DType t, int64_t rows, int64_t cols) {
  Graph g;
  const int x = g.add_tensor({-1, "x", {rows, cols}, t, TensorRole::input, 1});
  const int gamma = g.add_tensor({-1, "gamma", {cols}, t, TensorRole::weight, 1});
  const int y = g.add_tensor({-1, "y", {rows, cols}, t, TensorRole::activation, 1});
  Op op;
  op.name = "norm";
  op.kind = kind;
  op.dtype = t;
  op.inputs = {x, gamma};
  op.outputs = {y};
  op.attrs.rows = rows;
  op.attrs.cols = cols;
  g.add_op(op);
  return g;
}

Graph one_gemm_graph(int64_t m, int64_t n, int64_t k, DType t) {
  Graph g;
  const int a = g.add_tensor({-1, "a", {m, k}, t, TensorRole::input, 1});
  const int b = g.add_tensor({-1, "b", {k, n}, t, TensorRole::weight, 1});
  const int c = g.add_tensor({-1, "c", {m, n}, t, TensorRole::activation, 1});
  Op op;
  op.name = "gemm";
  op.kind = OpKind::gemm;
  op.dtype = t;
  op.inputs = {a, b};
  op.outputs = {c};
  op.attrs.m = m;
  op.attrs.n = n;
  op.attrs.k = k;
  g.add_op(op);
  return g;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

// The first op of `kind` in g (nullptr when there is none).
const Op* first_op(const Graph& g, OpKind kind) {
  for (const Op& op : g.ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

// The first `kind` op of tiny Llama's bf16 `phase` step (`batch` sequences of 64 tokens) is
// priced from its finer curve `finer` once the profile has one, and from the kind's curve `key`
// before that.
void check_finer_curve_first(Phase phase, int64_t batch, OpKind kind, const std::string& key,
                             const std::string& finer) {
  Workload w;
  w.phase = phase;
  w.batch = batch, w.prompt = 64;
  const Graph g = build_stack_graph(test_models::tiny_llama(), w, {{"bf16", {{"bf16", std::nullopt}}}}, 0);
  const Op* op = first_op(g, kind);
  REQUIRE(op != nullptr);
  Hardware hw = bare_gpu();
  const CalibrationPoint p = calibration_point(*op, predict_op(*op, g, hw), hw);
  CHECK(p.key == key);
  CHECK(p.finer_key == finer);
  hw.calibration.kernels[key] = EfficiencyCurve{{1e-9}, {0.6}};
  CHECK(predict_op(*op, g, hw).memory_time == approx(p.roofline_seconds / 0.6));
  hw.calibration.kernels[finer] = EfficiencyCurve{{1e-9}, {0.5}};
  CHECK(predict_op(*op, g, hw).memory_time == approx(p.roofline_seconds / 0.5));
}

}  // namespace

TEST_CASE("calibration: efficiency curves interpolate in log-log space and hold their ends") {
  const EfficiencyCurve c{{1e-6, 1e-4}, {0.1, 0.9}};
  // Halfway in log seconds: the geometric mean sqrt(0.1 · 0.9) = 0.3.
  CHECK(c.at(1e-5) == approx(0.3));
  CHECK(c.at(1e-6) == approx(0.1));
  CHECK(c.at(1e-9) == approx(0.1));  // held below the first point
  CHECK(c.at(1.0) == approx(0.9));   // and past the last
  const EfficiencyCurve single{{1e-3}, {0.42}};
  CHECK(single.at(5.0) == approx(0.42));
  const EfficiencyCurve descending{{1e-4, 1e-6}, {0.1, 0.2}};
  CHECK_THROWS_AS((void)descending.at(1e-5), std::logic_error);
  const EfficiencyCurve mismatched{{1e-6}, {0.1, 0.2}};
  CHECK_THROWS_AS((void)mismatched.at(1e-5), std::logic_error);
}

TEST_CASE("calibration: gemm tables blend reciprocal efficiencies trilinearly in 1/size") {
  const GemmTable t = corner_table();
  CHECK(t.at(1, 100, 100) == approx(0.1));
  CHECK(t.at(4, 400, 400) == approx(0.8));
  CHECK(t.at(4, 100, 400) == approx(0.4));
  // m = 2 between 1 and 4: weight (1/1 − 1/2) / (1/1 − 1/4) = 2/3 on the upper point, and
  // 1/eff = 10 · (1/3 + 2/3 · 1/2) = 20/3: eff = 0.15 (the time of an affine t = t0 + c·m).
  CHECK(t.at(2, 100, 100) == approx(0.15));
  // The same 2/3 on every axis: 1/eff = 10 · (2/3)^3, eff = 0.1 · (3/2)^3 = 0.3375.
  CHECK(t.at(2, 200, 200) == approx(0.3375));
  // Clamped outside the grid.
  CHECK(t.at(1e6, 1e6, 1e6) == approx(0.8));
  CHECK(t.at(0.5, 10, 10) == approx(0.1));
  GemmTable ragged = t;
  ragged.efficiency.pop_back();
  CHECK_THROWS_AS((void)ragged.at(2, 200, 200), std::logic_error);
}

TEST_CASE("calibration: keys name the kind, the priced dtype and the bound") {
  CHECK(calibration_key(OpKind::rmsnorm, DType::bf16, false) == "rmsnorm/bf16/memory");
  CHECK(calibration_key(OpKind::flash_attention, DType::fp16, true) == "flash_attention/fp16/compute");
  CHECK(calibration_key(OpKind::attn_scores, DType::bf16, false, "decode") == "attn_scores/bf16/memory/decode");
  CHECK(is_decode_attention(OpKind::flash_attention, 1));
  CHECK(is_decode_attention(OpKind::attn_context, 16));
  CHECK_FALSE(is_decode_attention(OpKind::attn_context, 17));   // a prompt
  CHECK_FALSE(is_decode_attention(OpKind::rmsnorm, 1));         // not attention
}

TEST_CASE("calibration: variants separate unaligned GEMMs and the fused optimizer") {
  Op g;
  g.kind = OpKind::gemm;
  g.dtype = DType::bf16;
  g.attrs.m = 4096, g.attrs.n = 1024, g.attrs.k = 1024;
  CHECK(gemm_rows_aligned(g));
  CHECK(calibration_variant(g).empty());
  g.attrs.n = 50257;  // GPT-2's vocabulary: B and C rows of 100,514 bytes
  CHECK_FALSE(gemm_rows_aligned(g));
  CHECK(calibration_variant(g) == "unaligned");
  g.attrs.n = 1024, g.attrs.k = 50257;  // the lm_head's dgrad: A rows unaligned
  CHECK_FALSE(gemm_rows_aligned(g));
  g.attrs.k = 1024, g.attrs.m = 50257;  // m is a leading dimension only when A is transposed
  CHECK(gemm_rows_aligned(g));
  g.attrs.trans_a = true;
  CHECK_FALSE(gemm_rows_aligned(g));
  g.attrs = {};
  g.dtype = DType::fp32, g.attrs.m = 7, g.attrs.n = 1028, g.attrs.k = 4;  // 4112 and 16 bytes
  CHECK(gemm_rows_aligned(g));
  g.dtype = DType::bf16;  // 2056 and 8 bytes: k breaks it
  CHECK_FALSE(gemm_rows_aligned(g));

  Op adam;
  adam.kind = OpKind::adamw;
  adam.attrs.passes = 4;
  CHECK(calibration_variant(adam).empty());
  adam.attrs.passes = 1;
  CHECK(calibration_variant(adam) == "fused");
  CHECK(calibration_key(OpKind::gemm, DType::bf16, true, calibration_variant(g)) == "gemm/bf16/compute/unaligned");
}

TEST_CASE("calibration: an unaligned GEMM's layout variant names its layout and unaligned operands") {
  // GPT-2's lm_head at 4096 tokens (vocabulary 50257, hidden 1024), bf16, as the builders make
  // it. Tied to the embedding table E [V, h]: forward x · E^T, dgrad dlogits · E, wgrad
  // dlogits^T · x. Untied, W [h, V]: forward x · W, dgrad dlogits · W^T, wgrad x^T · dlogits.
  auto gemm = [](int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    Op g;
    g.kind = OpKind::gemm;
    g.dtype = DType::bf16;
    g.attrs.m = m, g.attrs.n = n, g.attrs.k = k;
    g.attrs.trans_a = ta, g.attrs.trans_b = tb;
    return g;
  };
  constexpr int64_t t = 4096, v = 50257, h = 1024;
  CHECK(gemm_layout_variant(gemm(t, v, h, false, true)) == "unaligned_nt_c");    // tied forward: C rows V
  CHECK(gemm_layout_variant(gemm(t, h, v, false, false)) == "unaligned_nn_a");   // tied dgrad: A rows V
  CHECK(gemm_layout_variant(gemm(v, h, t, true, false)) == "unaligned_tn_a");    // wgrad into E: A^T rows V
  CHECK(gemm_layout_variant(gemm(t, v, h, false, false)) == "unaligned_nn_bc");  // untied forward
  CHECK(gemm_layout_variant(gemm(t, h, v, false, true)) == "unaligned_nt_ab");   // untied dgrad
  CHECK(gemm_layout_variant(gemm(h, v, t, true, false)) == "unaligned_tn_bc");   // untied wgrad
  CHECK(gemm_layout_variant(gemm(t, h, h, false, true)).empty());                // aligned
  // At most 8 rows (skinny_gemm_rows): the skinny kernels' curve.
  CHECK(gemm_layout_variant(gemm(3, v, h, false, true)) == "unaligned_nt_c_skinny");  // 3 prompts' last tokens
  CHECK(gemm_layout_variant(gemm(8, v, h, false, false)) == "unaligned_nn_bc_skinny");
  CHECK(gemm_layout_variant(gemm(9, v, h, false, false)) == "unaligned_nn_bc");
  Op norm;
  norm.kind = OpKind::rmsnorm;
  CHECK(gemm_layout_variant(norm).empty());

  for (std::string_view ok : {"decode", "unaligned", "fused", "unaligned_nt_c", "unaligned_tt_abc", "unaligned_nn_ac",
                              "unaligned_nt_c_skinny"})
    CHECK(is_calibration_variant(ok));
  for (std::string_view bad : {"", "wide", "unaligned_", "unaligned_nt", "unaligned_nt_", "unaligned_xt_a",
                               "unaligned_nt_ca", "unaligned_nt_d", "unaligned_ntc", "unaligned_nt__skinny",
                               "unaligned_nt_c_skinny_skinny"})
    CHECK_FALSE(is_calibration_variant(bad));
}

TEST_CASE("calibration: the cost model prices a kernel from its fitted curve") {
  Hardware hw = bare_gpu();
  const Graph g = one_op_graph(OpKind::rmsnorm, DType::bf16, 1000, 1000);
  const OpCost plain = predict_op(g.ops[0], g, hw);
  CHECK_FALSE(plain.calibrated);
  // x and y of 1000 x 1000 bf16 plus gamma: 4.002 MB at 2 TB/s = 2.001 us.
  const CalibrationPoint p = calibration_point(g.ops[0], plain, hw);
  CHECK(p.key == "rmsnorm/bf16/memory");
  CHECK(p.roofline_seconds == approx(2.001e-6));
  // The curve gives 0.25 at 2.001 us (held past its last point): the kernel takes 4x longer.
  hw.calibration.kernels["rmsnorm/bf16/memory"] = EfficiencyCurve{{1e-7, 1e-6}, {0.05, 0.25}};
  const OpCost fitted = predict_op(g.ops[0], g, hw);
  CHECK(fitted.calibrated);
  CHECK(fitted.memory_time == approx(4 * 2.001e-6));
  CHECK(fitted.time == approx(4 * 2.001e-6 + 5e-6));
  // Another dtype has no curve: class efficiencies price it.
  const Graph g32 = one_op_graph(OpKind::rmsnorm, DType::fp32, 1000, 1000);
  CHECK_FALSE(predict_op(g32.ops[0], g32, hw).calibrated);
}

TEST_CASE("calibration: gemms are priced from the grid of their dtype") {
  Hardware hw = bare_gpu();
  GemmTable t;
  t.m = {1, 1024};
  t.n = {1024};
  t.k = {1024};
  t.efficiency = {0.2, 0.8};
  hw.calibration.gemm[DType::bf16] = t;
  // 4096^3 bf16 (m clamped to the grid's 1024): 137.4 GFLOP at 1000 TFLOP/s = 137.4 us of
  // roofline against 100.7 MB / 2 TB/s = 50.3 us: compute bound; at 0.8: 171.8 us.
  const Graph big = one_gemm_graph(4096, 4096, 4096, DType::bf16);
  const OpCost c = predict_op(big.ops[0], big, hw);
  CHECK(c.calibrated);
  CHECK(c.compute_bound);
  CHECK(c.compute_time == approx(2.0 * 4096 * 4096 * 4096 / 1000e12 / 0.8));
  // m = 32 between 1 and 1024: weight w = (1 − 1/32) / (1 − 1/1024) on the upper point, and
  // 1/eff = (1 − w)/0.2 + w/0.8 = 1.36367: eff 0.73332. Memory bound: A 64 KiB + B 2 MiB +
  // C 64 KiB = 2228224 bytes at 2 TB/s = 1.114 us, / 0.73332 = 1.5193 us.
  const Graph skinny = one_gemm_graph(32, 1024, 1024, DType::bf16);
  const OpCost s = predict_op(skinny.ops[0], skinny, hw);
  CHECK_FALSE(s.compute_bound);
  const double w = (1 - 1.0 / 32) / (1 - 1.0 / 1024);
  CHECK(s.memory_time == approx(2228224.0 / 2e12 * ((1 - w) / 0.2 + w / 0.8)).scale(0));
  CHECK(s.memory_time == approx(1.5193e-6).scale(0).epsilon(1e-4));
  // fp32 has no grid: not calibrated.
  const Graph f32 = one_gemm_graph(1024, 1024, 1024, DType::fp32);
  CHECK_FALSE(predict_op(f32.ops[0], f32, hw).calibrated);
}

TEST_CASE("calibration: unaligned gemms are priced from their own curve when the profile has one") {
  Hardware hw = bare_gpu();
  GemmTable t;
  t.m = {1024};
  t.n = {1024};
  t.k = {1024};
  t.efficiency = {0.8};
  hw.calibration.gemm[DType::bf16] = t;
  // 4096 x 4097 x 4096 bf16: n odd. 137.5 GFLOP at 1000 TFLOP/s, compute bound.
  const Graph odd = one_gemm_graph(4096, 4097, 4096, DType::bf16);
  const double roofline = 2.0 * 4096 * 4097 * 4096 / 1000e12;
  // Without an unaligned curve the grid prices it, as an aligned GEMM.
  CHECK(predict_op(odd.ops[0], odd, hw).compute_time == approx(roofline / 0.8));
  hw.calibration.kernels["gemm/bf16/compute/unaligned"] = EfficiencyCurve{{1e-6}, {0.2}};
  const OpCost c = predict_op(odd.ops[0], odd, hw);
  CHECK(c.calibrated);
  CHECK(c.compute_time == approx(roofline / 0.2));
  // A curve of its own layout (NN, B and C rows unaligned) comes before the pooled one.
  CHECK(calibration_point(odd.ops[0], c, hw).finer_key == "gemm/bf16/compute/unaligned_nn_bc");
  hw.calibration.kernels["gemm/bf16/compute/unaligned_nn_bc"] = EfficiencyCurve{{1e-6}, {0.4}};
  hw.calibration.kernels["gemm/bf16/compute/unaligned_nt_c"] = EfficiencyCurve{{1e-6}, {0.1}};
  CHECK(predict_op(odd.ops[0], odd, hw).compute_time == approx(roofline / 0.4));
  // An aligned GEMM keeps the grid.
  const Graph even = one_gemm_graph(4096, 4096, 4096, DType::bf16);
  CHECK(calibration_point(even.ops[0], c, hw).finer_key.empty());
  CHECK(predict_op(even.ops[0], even, hw).compute_time == approx(2.0 * 4096 * 4096 * 4096 / 1000e12 / 0.8));
}

TEST_CASE("calibration: decode attention reads the curve of its query rows per K/V row first") {
  Op f;
  f.kind = OpKind::flash_attention;
  f.attrs.seq_q = 1, f.attrs.heads = 32, f.attrs.kv_heads = 32;
  CHECK(decode_rows_variant(f) == "decode_q1");      // MHA
  f.attrs.kv_heads = 8;
  CHECK(decode_rows_variant(f) == "decode_q4");      // Llama-3-8B: 4 rows per K/V row
  f.attrs.seq_q = 2;
  CHECK(decode_rows_variant(f) == "decode_qn");      // 8 rows
  f.attrs.seq_q = 1, f.attrs.heads = 25, f.attrs.kv_heads = 5;
  CHECK(decode_rows_variant(f) == "decode_qn");      // a group of 5
  f.attrs.seq_q = 64;
  CHECK(decode_rows_variant(f).empty());             // a prompt
  f.attrs.seq_q = 1, f.attrs.kv_block = 16;
  CHECK(decode_rows_variant(f).empty());             // paged: its own curve
  Op scores = f;
  scores.kind = OpKind::attn_scores, scores.attrs.kv_block = 0;
  CHECK(decode_rows_variant(scores).empty());        // materialized: cuBLAS, not the split kernel
  for (const char* v : {"decode_q1", "decode_q4", "decode_qn"}) CHECK(is_calibration_variant(v));
  CHECK_FALSE(is_calibration_variant("decode_q2"));

  // tiny Llama (4 heads on 2): rows 2 -> "decode_q4", read before the pooled decode curve.
  Workload w;
  w.phase = Phase::decode;
  w.batch = 4, w.prompt = 200, w.new_tokens = 100;
  const std::vector<StackStep> stack{{"flash", {{"bf16", std::nullopt}, {"flash_attention", std::nullopt}}}};
  const Graph g = build_stack_graph(test_models::tiny_llama(), w, stack, 0);
  const Op* attn = first_op(g, OpKind::flash_attention);
  REQUIRE(attn != nullptr);
  Hardware hw = bare_gpu();
  const CalibrationPoint p = calibration_point(*attn, predict_op(*attn, g, hw), hw);
  CHECK(p.key == "flash_attention/bf16/memory/decode");
  CHECK(p.finer_key == "flash_attention/bf16/memory/decode_q4");
  hw.calibration.kernels["flash_attention/bf16/memory/decode"] = EfficiencyCurve{{1e-9}, {0.5}};
  CHECK(predict_op(*attn, g, hw).memory_time == approx(p.roofline_seconds / 0.5));
  hw.calibration.kernels["flash_attention/bf16/memory/decode_q1"] = EfficiencyCurve{{1e-9}, {0.9}};
  CHECK(predict_op(*attn, g, hw).memory_time == approx(p.roofline_seconds / 0.5));  // not its rows
  hw.calibration.kernels["flash_attention/bf16/memory/decode_q4"] = EfficiencyCurve{{1e-9}, {0.4}};
  CHECK(predict_op(*attn, g, hw).memory_time == approx(p.roofline_seconds / 0.4));
}

TEST_CASE("calibration: a one-sequence KV append or last-token slice reads the contiguous copy's curve first") {
  Op k;
  k.kind = OpKind::kv_append;
  k.attrs.batch = 1, k.attrs.seq_q = 2048, k.attrs.kv_heads = 8, k.attrs.head_dim = 128;
  CHECK(copy_rows_variant(k) == "contiguous");  // one 2048-row block: a plain copy
  CHECK(finer_calibration_variant(k) == "contiguous");
  k.attrs.batch = 2;
  CHECK(copy_rows_variant(k).empty());          // a 2-D copy of 2 blocks
  k.attrs.batch = 1, k.attrs.kv_block = 16;
  CHECK(copy_rows_variant(k).empty());          // paged: its own kernel and curve
  Op s;
  s.kind = OpKind::slice_last_token;
  s.attrs.batch = 1;
  CHECK(copy_rows_variant(s) == "contiguous");
  s.attrs.batch = 3;
  CHECK(copy_rows_variant(s).empty());
  Op add;
  add.kind = OpKind::residual_add;
  add.attrs.batch = 1;
  CHECK(copy_rows_variant(add).empty());        // not a copy
  CHECK(is_calibration_variant("contiguous"));

  // Priced from its own curve when the profile has one, else from the kind's.
  check_finer_curve_first(Phase::prefill, 1, OpKind::kv_append, "kv_append/bf16/memory",
                          "kv_append/bf16/memory/contiguous");
}

TEST_CASE("calibration: cross-entropy reads the curve of the kernel path its rows take") {
  Op ce;
  ce.kind = OpKind::cross_entropy;
  auto path = [&](DType t, int64_t cols) {
    ce.dtype = t, ce.attrs.rows = 1536, ce.attrs.cols = cols;
    return cross_entropy_variant(ce);
  };
  // bf16 packs hold 8 logits, fp32 packs 4.
  CHECK(path(DType::bf16, 32000) == "regs");               // 4000 packs in registers
  CHECK(path(DType::bf16, 32768) == "regs");               // 4096 packs: the most
  CHECK(path(DType::bf16, 32776) == "smem");               // 4097 packs, 65552 B in shared memory
  CHECK(path(DType::bf16, 65536) == "two_sweeps");         // 8192 packs, 131072 B > 110 KiB
  CHECK(path(DType::bf16, 32001) == "smem_scalar");        // odd: element by element, 64002 B
  CHECK(path(DType::bf16, 4095) == "regs_scalar");         // 4095 elements in registers
  CHECK(path(DType::fp32, 16384) == "regs");               // 4096 packs
  CHECK(path(DType::fp32, 28160) == "smem");               // 7040 packs, 112640 B = 110 KiB
  CHECK(path(DType::fp32, 28164) == "two_sweeps");         // 112656 B
  CHECK(path(DType::fp32, 32001) == "two_sweeps_scalar");  // 128004 B
  CHECK(finer_calibration_variant(ce) == "two_sweeps_scalar");
  Op add;
  add.kind = OpKind::residual_add, add.attrs.cols = 1000;
  CHECK(cross_entropy_variant(add).empty());
  for (const char* v : {"regs", "smem", "two_sweeps", "regs_scalar", "smem_scalar", "two_sweeps_scalar"})
    CHECK(is_calibration_variant(v));
  CHECK_FALSE(is_calibration_variant("smem_vector"));
  CHECK_FALSE(is_calibration_variant("_scalar"));

  // A training step's loss (tiny Llama's vocabulary of 100: element by element, in registers)
  // reads its path's curve when the profile has one, else the kind's.
  check_finer_curve_first(Phase::train, 2, OpKind::cross_entropy, "cross_entropy/bf16/memory",
                          "cross_entropy/bf16/memory/regs_scalar");
}

TEST_CASE("calibration: materialized attention reads its curve at the work of one batched GEMM call") {
  Op op;
  op.kind = OpKind::attn_scores;
  op.attrs.batch = 4, op.attrs.heads = 16, op.attrs.kv_heads = 16;
  CHECK(batched_gemm_calls(op) == 4);    // GPT-2 medium, batch 4: per sequence, 16 heads a call
  op.kind = OpKind::attn_scores_bwd;
  CHECK(batched_gemm_calls(op) == 8);    // dQ and dK
  op.kind = OpKind::attn_context;
  op.attrs.batch = 1, op.attrs.heads = 32, op.attrs.kv_heads = 8;
  CHECK(batched_gemm_calls(op) == 4);    // Llama-3-8B prompt: b·g = 4 calls of 8 kv heads
  op.attrs.batch = 3, op.attrs.heads = 18, op.attrs.kv_heads = 6;
  CHECK(batched_gemm_calls(op) == 9);    // b·g = 9 < 18 heads
  op.attrs.batch = 16, op.attrs.heads = 8, op.attrs.kv_heads = 2;
  CHECK(batched_gemm_calls(op) == 8);    // b·g = 64 > 8 heads: one call per query head
  op.kind = OpKind::attn_context_bwd;
  CHECK(batched_gemm_calls(op) == 16);
  op.kind = OpKind::flash_attention;
  CHECK(batched_gemm_calls(op) == 1);
  op.kind = OpKind::gemm;
  CHECK(batched_gemm_calls(op) == 1);

  // tiny Llama (4 heads on 2), batch 4 prompt: min(4·2, 4) = 4 calls.
  Workload w;
  w.phase = Phase::prefill;
  w.batch = 4, w.prompt = 256;
  const std::vector<StackStep> stack{{"bf16", {{"bf16", std::nullopt}}}};
  const Graph g = build_stack_graph(test_models::tiny_llama(), w, stack, 0);
  const Op* scores = nullptr;
  for (const Op& o : g.ops)
    if (o.kind == OpKind::attn_scores && scores == nullptr) scores = &o;
  REQUIRE(scores != nullptr);
  Hardware hw = bare_gpu();
  const CalibrationPoint p = calibration_point(*scores, predict_op(*scores, g, hw), hw);
  CHECK(p.curve_seconds == approx(p.roofline_seconds / 4));
  // A curve of 0.2 up to a quarter of the op's roofline time and 0.8 from its whole: read at
  // the quarter (one call's work), the op runs at 0.2.
  hw.calibration.kernels[p.key] = EfficiencyCurve{{p.roofline_seconds / 4, p.roofline_seconds}, {0.2, 0.8}};
  const OpCost c = predict_op(*scores, g, hw);
  CHECK(c.calibrated);
  CHECK(std::max(c.compute_time, c.memory_time) == approx(p.roofline_seconds / 0.2));
}

TEST_CASE("calibration: paged ops read their paged curve, else the unpaged one") {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 4, w.prompt = 200, w.new_tokens = 100;
  const std::vector<StackStep> stack{
      {"paged", {{"bf16", std::nullopt}, {"flash_attention", std::nullopt}, {"paged_kv", std::nullopt}}}};
  const Graph g = build_stack_graph(test_models::tiny_llama(), w, stack, 0);
  Hardware hw = bare_gpu();
  const Op* attn = nullptr;
  const Op* append = nullptr;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::flash_attention && attn == nullptr) attn = &op;
    if (op.kind == OpKind::kv_append && append == nullptr) append = &op;
  }
  REQUIRE(attn != nullptr);
  REQUIRE(append != nullptr);
  CHECK(calibration_variant(*attn) == "paged");
  CHECK(unpaged_calibration_variant(*attn) == "decode");
  CHECK(is_calibration_variant("paged"));
  const OpCost plain = predict_op(*attn, g, hw);
  CHECK_FALSE(plain.calibrated);
  const CalibrationPoint p = calibration_point(*attn, plain, hw);
  CHECK(p.key == "flash_attention/bf16/memory/paged");
  CHECK(p.fallback_key == "flash_attention/bf16/memory/decode");
  const CalibrationPoint pa = calibration_point(*append, predict_op(*append, g, hw), hw);
  CHECK(pa.key == "kv_append/bf16/memory/paged");
  CHECK(pa.fallback_key == "kv_append/bf16/memory");
  // Only the decode curve: it prices the paged op. Then the paged curve takes over.
  hw.calibration.kernels["flash_attention/bf16/memory/decode"] = EfficiencyCurve{{1e-9}, {0.5}};
  const OpCost by_decode = predict_op(*attn, g, hw);
  CHECK(by_decode.calibrated);
  CHECK(by_decode.memory_time == approx(p.roofline_seconds / 0.5));
  hw.calibration.kernels["flash_attention/bf16/memory/paged"] = EfficiencyCurve{{1e-9}, {0.25}};
  CHECK(predict_op(*attn, g, hw).memory_time == approx(p.roofline_seconds / 0.25));
  // The pages read are the 251 valid rows of each sequence (context 250 + 1), not the pool:
  // K and V of 4 x 251 rows x 2 kv heads x 16 x 2 bytes, Q and O of 4 x 4 x 16 x 2 bytes,
  // the table 4 x 16 pages x 4 bytes, LSE 4 x 4 x 4 bytes.
  const double bytes = 2.0 * 4 * 251 * 32 * 2 + 2.0 * 4 * 64 * 2 + 4 * 16 * 4 + 4 * 4 * 4;
  CHECK(plain.bytes == approx(bytes));
}

TEST_CASE("calibration: a fitted alpha-beta prices its collective, and other groups in the node") {
  Hardware hw = bare_gpu();
  hw.nvlink = {400e9, 2e-6};
  hw.gpus_per_node = 8;
  hw.calibration.collectives[{Collective::all_reduce, 2}] = CollectiveFit{10e-6, 100e9};
  // 2 ranks, 1 GB buffer: ring all-reduce sends 2(n-1)/n = 1 GB per rank: 10 us + 10 ms.
  CHECK(*collective_time(Collective::all_reduce, 2, 1e9, hw) == approx(10e-6 + 1e-2));
  // 4 ranks in the node, no fit of their own: the 2-rank fit at the same 1.5 GB per rank.
  CHECK(*collective_time(Collective::all_reduce, 4, 1e9, hw) == approx(10e-6 + 1.5e9 / 100e9));
  // Another collective has no fit: the link figures, 3 steps x 2 us + 0.75 GB / 400 GB/s.
  CHECK(*collective_time(Collective::all_gather, 4, 1e9, hw) == approx(3 * 2e-6 + 0.75e9 / 400e9));
  // 16 ranks leave the node: the 2-rank fit measured NVLink only, so the links price it.
  hw.infiniband = {50e9, 5e-6};
  CHECK(*collective_time(Collective::all_reduce, 16, 1e9, hw) ==
        approx(30 * 5e-6 + 1.875e9 / 400e9));
}

TEST_CASE("calibration: a collective op priced from a fit counts as calibrated") {
  Hardware hw = bare_gpu();
  hw.nvlink = {400e9, 2e-6};
  hw.gpus_per_node = 8;
  Graph g;
  const int x = g.add_tensor({-1, "x", {1000, 1000}, DType::bf16, TensorRole::activation, 1});
  const int y = g.add_tensor({-1, "y", {1000, 1000}, DType::bf16, TensorRole::activation, 1});
  Op op;
  op.name = "all_reduce";
  op.kind = OpKind::collective;
  op.dtype = DType::bf16;
  op.inputs = {x};
  op.outputs = {y};
  op.attrs.collective = Collective::all_reduce;
  op.attrs.group = 4;
  g.add_op(op);
  CHECK_FALSE(predict_op(g.ops[0], g, hw).calibrated);
  hw.calibration.collectives[{Collective::all_reduce, 2}] = CollectiveFit{10e-6, 100e9};
  const OpCost c = predict_op(g.ops[0], g, hw);
  CHECK(c.calibrated);
  // 2 MB buffer over 4 ranks: 3 MB per rank at 100 GB/s + 10 us, plus one eager launch.
  CHECK(c.time == approx(10e-6 + 3e6 / 100e9 + hw.launch_eager));
}

TEST_CASE("calibration: another group's measured sizes are read at equal bytes per rank") {
  Hardware hw = bare_gpu();
  hw.nvlink = {400e9, 2e-6};
  hw.gpus_per_node = 8;
  CollectiveFit two;
  two.payload = {1e6, 1e9};
  two.seconds = {1e-5, 1e-2};
  hw.calibration.collectives[{Collective::all_reduce, 2}] = two;
  // 4 ranks, 400 MB: 600 MB per rank, what 2 ranks send for a 600 MB buffer:
  // 10 us + (10 ms - 10 us) x (600 - 1) / (1000 - 1) = 6.0 ms.
  CHECK(*collective_time(Collective::all_reduce, 4, 4e8, hw) == approx(6e-3));
  // Below the smallest measured size: its time, the latency floor.
  CHECK(*collective_time(Collective::all_reduce, 8, 1e3, hw) == approx(1e-5));
  CHECK(fitted_collective(Collective::all_reduce, 8, hw)->group == 2);

  // The nearest fitted group: the largest below, else the smallest above.
  CollectiveFit four = two;
  four.seconds = {2e-5, 2e-2};
  hw.calibration.collectives[{Collective::all_reduce, 4}] = four;
  CHECK(fitted_collective(Collective::all_reduce, 8, hw)->group == 4);
  CHECK(fitted_collective(Collective::all_reduce, 3, hw)->group == 2);
  hw.calibration.collectives.erase({Collective::all_reduce, 2});
  CHECK(fitted_collective(Collective::all_reduce, 2, hw)->group == 4);
  // 2 ranks, 500 MB: 500 MB per rank, what 4 ranks send for a 333.3 MB buffer (x 3/2):
  // 20 us + (20 ms - 20 us) x (333.3 - 1) / (1000 - 1) = 6.667 ms.
  CHECK(*collective_time(Collective::all_reduce, 2, 5e8, hw) == approx(2e-5 + (2e-2 - 2e-5) * (5e8 / 1.5 - 1e6) / (1e9 - 1e6)));
  CHECK_FALSE(fitted_collective(Collective::all_gather, 2, hw).has_value());
  CHECK_FALSE(fitted_collective(Collective::all_reduce, 16, hw).has_value());
}

TEST_CASE("profiles: written as Lua and loaded back unchanged") {
  Hardware hw = find_hardware("H100-SXM");
  hw.name = "test-local";
  hw.base = "H100-SXM";
  hw.calibrated = true;
  hw.launch_eager = 7.5e-6;
  hw.launch_graph = 1.25e-6;
  hw.launch_wait = 2.5e-6;
  hw.pcie = {52e9, 9e-6};
  hw.dispatch_eager = 8e-6;
  hw.dispatch_by_kind[OpKind::gemm] = 14.5e-6;
  hw.dispatch_fixed_by_kind[OpKind::attn_scores] = 21e-6;
  hw.calibration.gemm[DType::bf16] = corner_table();
  hw.calibration.kernels["rmsnorm/bf16/memory"] = EfficiencyCurve{{1e-7, 1e-5}, {0.05, 0.85}};
  hw.calibration.collectives[{Collective::all_gather, 4}] = CollectiveFit{12e-6, 150e9};
  CollectiveFit measured;
  measured.payload = {8192, 1073741824};
  measured.seconds = {9.5e-6, 3.25e-3};
  hw.calibration.collectives[{Collective::all_reduce, 2}] = measured;
  hw.calibration.measured_on = {"cuda", "Test GPU", "580.1", "CUDA 13.0", "2026-11-22", "quick"};
  const std::string text = profile_to_lua(hw);
  CHECK(text.find("return profile {") != std::string::npos);
  CHECK(text.find("[\"rmsnorm/bf16/memory\"]") != std::string::npos);

  const Hardware back = load_profile(temp_file("perfsim_test_profile.lua", text));
  CHECK(back.name == "test-local");
  CHECK(back.base == "H100-SXM");
  CHECK(back.calibrated);
  CHECK(back.launch_eager == approx(7.5e-6));
  CHECK(back.launch_wait == approx(2.5e-6));
  CHECK(back.pcie.bandwidth == approx(52e9));
  CHECK(back.dispatch_eager == approx(8e-6));
  CHECK(back.dispatch(OpKind::gemm) == approx(14.5e-6));
  CHECK(back.dispatch_fixed(OpKind::attn_scores) == approx(21e-6));
  CHECK(back.dispatch_fixed(OpKind::gemm) == 0.0);
  CHECK(back.dispatch(OpKind::rmsnorm) == approx(8e-6));
  CHECK(back.peak(DType::bf16) == approx(hw.peak(DType::bf16)));
  REQUIRE(back.calibration.gemm.count(DType::bf16) == 1);
  CHECK(back.calibration.gemm.at(DType::bf16).at(2, 200, 200) == approx(0.3375));
  REQUIRE(back.calibration.kernels.count("rmsnorm/bf16/memory") == 1);
  CHECK(back.calibration.kernels.at("rmsnorm/bf16/memory").at(1e-6) ==
        approx(std::sqrt(0.05 * 0.85)));
  const auto fit = back.calibration.collectives.find({Collective::all_gather, 4});
  REQUIRE(fit != back.calibration.collectives.end());
  CHECK(fit->second.bandwidth == approx(150e9));
  const auto points = back.calibration.collectives.find({Collective::all_reduce, 2});
  REQUIRE(points != back.calibration.collectives.end());
  // Byte counts come back whole, not rounded to 6 digits.
  CHECK(points->second.payload == std::vector<double>{8192, 1073741824});
  CHECK(points->second.seconds[1] == approx(3.25e-3));
  CHECK(back.gpus_per_node == 8);  // the H100-SXM entry's, written into the profile
  CHECK(back.calibration.measured_on.device == "Test GPU");
  CHECK(back.calibration.measured_on.mode == "quick");
}

TEST_CASE("profiles: gpus_per_node comes from the base entry unless the profile gives it") {
  const std::string old = temp_file("perfsim_test_old_nodes.lua", R"(return profile {
  name = "old", base = "H100-SXM", calibrated = true,
})");
  CHECK(load_profile(old).gpus_per_node == 8);
  const std::string given = temp_file("perfsim_test_given_nodes.lua", R"(return profile {
  name = "four", base = "H100-SXM", gpus_per_node = 4,
})");
  CHECK(load_profile(given).gpus_per_node == 4);
  const std::string unknown = temp_file("perfsim_test_pcie_nodes.lua", R"(return profile {
  name = "pcie", base = "H100-PCIe",
})");
  CHECK(load_profile(unknown).gpus_per_node == 0);
  const std::string negative = temp_file("perfsim_test_negative_nodes.lua", R"(return profile {
  name = "bad", base = "H100-SXM", gpus_per_node = -1,
})");
  CHECK_THROWS_WITH_AS((void)load_profile(negative), doctest::Contains("gpus_per_node must be >= 0"), ConfigError);
}

TEST_CASE("profiles: bad files and names are errors that say what to fix") {
  const std::string ragged = temp_file("perfsim_test_ragged.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  gemm = { bf16 = { m = {1, 2}, n = {8}, k = {8}, efficiency = { {{0.5}} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(ragged),
                       doctest::Contains("efficiency must hold one entry per m (2)"), ConfigError);
  const std::string negative = temp_file("perfsim_test_negative.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { ["rmsnorm/bf16/memory"] = { seconds = {1e-6, 1e-5}, efficiency = {0.5, -1} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(negative), doctest::Contains("efficiency[2] must be > 0"),
                       ConfigError);
  const std::string bad_key = temp_file("perfsim_test_key.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { rmsnorm = { seconds = {1e-6}, efficiency = {0.5} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_key), doctest::Contains("kind/dtype/bound"), ConfigError);
  const std::string bad_variant = temp_file("perfsim_test_variant.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { ["rmsnorm/bf16/memory/wide"] = { seconds = {1e-6}, efficiency = {0.5} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_variant), doctest::Contains("decode, unaligned[_<layout>_<operands>] or fused"), ConfigError);
  const std::string bad_layout = temp_file("perfsim_test_layout.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  kernels = { ["gemm/bf16/compute/unaligned_nx_c"] = { seconds = {1e-6}, efficiency = {0.5} } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_layout), doctest::Contains("unaligned_nx_c"), ConfigError);
  const std::string bad_fixed = temp_file("perfsim_test_fixed.lua", R"(return profile {
  name = "bad", base = "H100-SXM", dispatch_fixed = { attn_scores = -1e-6 },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(bad_fixed), doctest::Contains("dispatch_fixed.attn_scores must be seconds >= 0"),
                       ConfigError);
  // The message names the file: the profile's fields have no line of their own.
  CHECK_THROWS_WITH_AS((void)load_profile(bad_fixed), doctest::Contains((bad_fixed + ": ").c_str()), ConfigError);
  const std::string both = temp_file("perfsim_test_coll_both.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_reduce = { [2] = { bytes = {8192, 65536}, seconds = {9e-6, 10e-6}, latency = 1e-6 } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(both), doctest::Contains("collectives.all_reduce[2]: give either bytes and seconds"),
                       ConfigError);
  const std::string falling = temp_file("perfsim_test_coll_falling.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_gather = { [4] = { bytes = {8192, 65536}, seconds = {9e-6, 8e-6} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(falling), doctest::Contains("seconds must not decrease with bytes"),
                       ConfigError);
  const std::string misspelled = temp_file("perfsim_test_coll_name.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_gahter = { [2] = { bytes = {8192, 65536}, seconds = {9e-6, 10e-6} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(misspelled), doctest::Contains("collective 'all_gahter' is not one of"),
                       ConfigError);
  CHECK_THROWS_WITH_AS((void)load_profile(misspelled), doctest::Contains("(did you mean 'all_gather'?)"), ConfigError);
  const std::string one_point = temp_file("perfsim_test_coll_one.lua", R"(return profile {
  name = "bad", base = "H100-SXM",
  collectives = { all_gather = { [4] = { bytes = {8192}, seconds = {9e-6} } } },
})");
  CHECK_THROWS_WITH_AS((void)load_profile(one_point), doctest::Contains("needs 2 or more bytes with a time each"),
                       ConfigError);
  const std::string no_base = temp_file("perfsim_test_nobase.lua", "return profile { name = 'x' }");
  CHECK_THROWS_WITH_AS((void)load_profile(no_base), doctest::Contains("missing field 'base'"), ConfigError);
  CHECK_THROWS_WITH_AS((void)load_profile("no-such-profile"),
                       doctest::Contains("unknown profile 'no-such-profile'"), ConfigError);
  CHECK_THROWS_WITH_AS((void)load_profile("/nonexistent/p.lua"), doctest::Contains("not found"),
                       ConfigError);
}
