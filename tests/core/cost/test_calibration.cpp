// Calibration tables: log-space interpolation on hand-checkable points, and the cost model
// pricing ops from them (curve keys and their variants). Collectives: tests/core/cost/test_calibration_collectives.cpp;
// profiles as Lua: tests/dsl/test_profiles_lua.cpp.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "calibration_test_util.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/calibration.hpp"
#include "core/cost/cost_model.hpp"
#include "core/cost/roofline.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "dsl/dsl.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;
using perfsim::test::bare_gpu;
using perfsim::test::corner_table;
using perfsim::test::first_op;

namespace {

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
  // Paged and varlen kinds read their dense kind's curves, the layout in the variant.
  CHECK(calibration_key(OpKind::paged_flash_attention, DType::bf16, false, "paged") ==
        "flash_attention/bf16/memory/paged");
  CHECK(calibration_key(OpKind::varlen_flash_attention, DType::bf16, true, "paged") ==
        "flash_attention/bf16/compute/paged");
  CHECK(calibration_key(OpKind::paged_kv_append, DType::bf16, false, "paged") == "kv_append/bf16/memory/paged");
  CHECK(calibration_key(OpKind::varlen_kv_append, DType::fp32, false, "paged") == "kv_append/fp32/memory/paged");
  CHECK(calibration_key(OpKind::varlen_rope, DType::bf16, false) == "rope/bf16/memory");
  CHECK(calibration_key(OpKind::varlen_slice_last_token, DType::bf16, false) == "slice_last_token/bf16/memory");
  CHECK(is_decode_attention(OpKind::paged_flash_attention, 1));
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
  // fp32 has no curve of its own: a memory-bound kernel takes its kind's bf16 curve, as
  // bytes over time. 8.004 MB at 2 TB/s = 4.002 us of roofline, past the curve's last point:
  // 0.25, 16.008 us.
  const Graph g32 = one_op_graph(OpKind::rmsnorm, DType::fp32, 1000, 1000);
  const OpCost borrowed = predict_op(g32.ops[0], g32, hw);
  CHECK(borrowed.calibrated);
  CHECK(borrowed.memory_time == approx(4 * 4.002e-6));
  // Without a curve of the kind at any precision, class efficiencies price it.
  hw.calibration.kernels.erase("rmsnorm/bf16/memory");
  hw.calibration.kernels["layernorm/bf16/memory"] = EfficiencyCurve{{1e-7, 1e-6}, {0.05, 0.25}};
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
  f.attrs.seq_q = 1, f.attrs.kv_block = 16, f.kind = OpKind::paged_flash_attention;
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
  k.attrs.batch = 1, k.attrs.kv_block = 16, k.kind = OpKind::paged_kv_append;
  CHECK(copy_rows_variant(k).empty());          // paged: its own kernel and curve
  k.kind = OpKind::varlen_kv_append;
  CHECK(copy_rows_variant(k).empty());
  Op s;
  s.kind = OpKind::slice_last_token;
  s.attrs.batch = 1;
  CHECK(copy_rows_variant(s) == "contiguous");
  s.attrs.batch = 3;
  CHECK(copy_rows_variant(s).empty());
  s.kind = OpKind::varlen_slice_last_token, s.attrs.batch = 1;
  CHECK(copy_rows_variant(s).empty());          // a gather of rows anywhere in the step
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
    if (op.kind == OpKind::paged_flash_attention && attn == nullptr) attn = &op;
    if (op.kind == OpKind::paged_kv_append && append == nullptr) append = &op;
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

TEST_CASE("calibration: past its largest kernel a curve streams at a broader curve's rate") {
  // A paged KV append bigger than any the paged curve measured: the largest measured one's time
  // is kept as a fixed part and the rest runs at the unpaged curve's efficiency there.
  Workload w;
  w.phase = Phase::decode;
  w.batch = 4, w.prompt = 200, w.new_tokens = 100;
  const std::vector<StackStep> stack{
      {"paged", {{"bf16", std::nullopt}, {"flash_attention", std::nullopt}, {"paged_kv", std::nullopt}}}};
  const Graph g = build_stack_graph(test_models::tiny_llama(), w, stack, 0);
  Hardware hw = bare_gpu();
  const Op* append = nullptr;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::paged_kv_append && append == nullptr) append = &op;
  REQUIRE(append != nullptr);
  const CalibrationPoint p = calibration_point(*append, predict_op(*append, g, hw), hw);
  const double r = p.curve_seconds;
  const double r_max = r / 4;  // the paged curve's largest kernel: a quarter of this one
  hw.calibration.kernels["kv_append/bf16/memory/paged"] = EfficiencyCurve{{r_max / 10, r_max}, {0.01, 0.02}};
  // Without a broader curve the paged one holds its last efficiency.
  CHECK(predict_op(*append, g, hw).memory_time == approx(p.roofline_seconds / 0.02));
  // The unpaged curve measured bigger kernels, at 0.5: r_max / 0.02 + (r − r_max) / 0.5.
  hw.calibration.kernels["kv_append/bf16/memory"] = EfficiencyCurve{{r_max / 10, 10 * r}, {0.5, 0.5}};
  const double efficiency = r / (r_max / 0.02 + (r - r_max) / 0.5);
  CHECK(predict_op(*append, g, hw).memory_time == approx(p.roofline_seconds / efficiency));
  // A broader curve no faster than the paged one's last point changes nothing.
  hw.calibration.kernels["kv_append/bf16/memory"] = EfficiencyCurve{{r_max / 10, 10 * r}, {0.01, 0.01}};
  CHECK(predict_op(*append, g, hw).memory_time == approx(p.roofline_seconds / 0.02));
}

TEST_CASE("calibration: ops on an fp8 KV cache have curves of their own, the 16-bit cache's as fallback") {
  const Hardware hw = bare_gpu();
  Workload w;
  w.phase = Phase::decode;
  w.batch = 2, w.prompt = 64, w.new_tokens = 16;
  std::vector<StackStep> stack = {{"bf16", {{"bf16", {}}}}, {"+flash", {{"flash_attention", {}}}},
                                  {"+paged", {{"paged_kv", {}}}}, {"+fp8_kv", {{"fp8_kv", {}}}}};
  const Graph g = build_stack_graph(test_models::tiny_llama(), w, stack, 3, BuildOptions{1});
  int seen = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::paged_flash_attention && op.kind != OpKind::paged_kv_append) continue;
    const CalibrationPoint p = calibration_point(op, predict_op(op, g, hw), hw);
    const std::string family = op.kind == OpKind::paged_kv_append ? "kv_append" : "flash_attention";
    CHECK(p.key == family + "/bf16/memory/paged_fp8kv");
    // As at 16 bits, a paged curve falls back to the unpaged one: a prompt's appends measure it.
    const std::string unpaged = op.kind == OpKind::paged_kv_append ? "fp8kv" : "decode_fp8kv";
    CHECK(p.fallback_key == family + "/bf16/memory/" + unpaged);
    CHECK(p.finer_key.empty());
    ++seen;
  }
  CHECK(seen == 3);  // the K and V appends and the attention of the one layer built
  // A profile without fp8 curves prices the ops by the 16-bit cache's.
  Hardware with16 = hw;
  with16.calibration.kernels["kv_append/bf16/memory/paged"] = EfficiencyCurve{{1e-9, 1e-3}, {0.25, 0.25}};
  for (const Op& op : g.ops)
    if (op.kind == OpKind::paged_kv_append) {
      const OpCost c = predict_op(op, g, with16);
      CHECK(c.calibrated);
      CHECK(c.memory_time == approx(c.bytes / with16.memory_bandwidth / 0.25));
    }
  // The same step over a contiguous cache: the decode attention's variant.
  stack.erase(stack.begin() + 2);
  const Graph flat = build_stack_graph(test_models::tiny_llama(), w, stack, 2, BuildOptions{1});
  for (const Op& op : flat.ops)
    if (op.kind == OpKind::flash_attention) {
      const CalibrationPoint p = calibration_point(op, predict_op(op, flat, hw), hw);
      CHECK(p.key == "flash_attention/bf16/memory/decode_fp8kv");
      CHECK(p.fallback_key == "flash_attention/bf16/memory/decode");
    }
  CHECK(is_calibration_variant("paged_fp8kv"));
  CHECK(is_calibration_variant("fp8kv"));
  CHECK_FALSE(is_calibration_variant("wide_fp8kv"));
}

TEST_CASE("calibration: the engine's varlen decode attention reads its own curve, else the paged kernel's") {
  EngineStepShape s;
  s.q_len = {1, 1, 1};
  s.kv_len = {40, 90, 17};
  s.sampled = 3;
  s.pool_blocks = 32;
  s.kv_block = 16;
  s.table_width = 8;
  Graph g = build_engine_step(test_models::tiny_llama(), s);
  apply_graph_pass(PassSpec{"bf16", {}}, g);
  Hardware hw = bare_gpu();
  const Op* attention = nullptr;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::varlen_flash_attention) attention = &op;
  REQUIRE(attention != nullptr);
  const CalibrationPoint p = calibration_point(*attention, predict_op(*attention, g, hw), hw);
  CHECK(p.key == "flash_attention/bf16/memory/varlen_decode");
  CHECK(p.fallback_key == "flash_attention/bf16/memory/paged");
  // Only the paged kernel's curve: the op reads it (0.2), as before it had one of its own.
  hw.calibration.kernels["flash_attention/bf16/memory/paged"] = EfficiencyCurve{{1e-9, 1e-3}, {0.2, 0.2}};
  hw.calibration.kernels["flash_attention/bf16/memory/decode"] = EfficiencyCurve{{1e-9, 1e-3}, {0.1, 0.1}};
  OpCost c = predict_op(*attention, g, hw);
  CHECK(c.memory_time == approx(c.bytes / hw.memory_bandwidth / 0.2));
  // Its own curve (0.5) wins over both.
  hw.calibration.kernels["flash_attention/bf16/memory/varlen_decode"] = EfficiencyCurve{{1e-9, 1e-3}, {0.5, 0.5}};
  c = predict_op(*attention, g, hw);
  CHECK(c.memory_time == approx(c.bytes / hw.memory_bandwidth / 0.5));
  CHECK(is_calibration_variant("varlen_decode"));
  CHECK(is_calibration_variant("varlen_decode_fp8kv"));
}
