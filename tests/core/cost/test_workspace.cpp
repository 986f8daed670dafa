// Kernel workspaces (core/cost/workspace.hpp): hand-computed sizes of a norm backward, a flash
// backward, split-KV decode, GEMM C staging and fp8 scales on an H100-like profile, zero on a
// CPU profile; and the memory model holding an op's workspace while it runs (side-stream
// workspaces until the end of the step).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "core/cost/memory_model.hpp"
#include "core/cost/workspace.hpp"
#include "core/graph/op_kind.hpp"

using namespace perfsim;

namespace {

Hardware h100() {
  Hardware hw;
  hw.name = "H100-SXM";
  hw.kind = "gpu";
  hw.sm_count = 132;
  return hw;
}

Hardware cpu_profile() {
  Hardware hw;
  hw.name = "host-cpu";
  hw.kind = "cpu";
  hw.sm_count = 16;
  return hw;
}

int tensor(Graph& g, const std::string& name, std::vector<int64_t> shape, DType t, TensorRole role) {
  return g.add_tensor({-1, name, std::move(shape), t, role, 1});
}

// rmsnorm_bwd on x, dy [rows, cols] of dtype t: {x, gamma, dy} -> {dx, dgamma}.
Graph norm_bwd(int64_t rows, int64_t cols, DType t, OpKind kind = OpKind::rmsnorm_bwd) {
  Graph g;
  const int x = tensor(g, "x", {rows, cols}, t, TensorRole::input);
  const int gamma = tensor(g, "gamma", {cols}, t, TensorRole::weight);
  const int dy = tensor(g, "dy", {rows, cols}, t, TensorRole::input);
  const int dx = tensor(g, "dx", {rows, cols}, t, TensorRole::activation);
  const int dgamma = tensor(g, "dgamma", {cols}, t, TensorRole::gradient);
  Op o;
  o.name = "norm_bwd";
  o.kind = kind;
  o.dtype = t;
  o.inputs = {x, gamma, dy};
  o.outputs = {dx, dgamma};
  if (kind == OpKind::layernorm_bwd) o.outputs.push_back(tensor(g, "dbeta", {cols}, t, TensorRole::gradient));
  g.add_op(o);
  return g;
}

// Attention operands: Q-like [b, sq, H, d], K/V [b, skv, Hkv, d], LSE [b, H, sq] fp32.
struct AttnDims {
  int64_t b, sq, skv, heads, kv_heads, d;
};

Graph flash(const AttnDims& a, bool backward) {
  Graph g;
  const DType t = DType::bf16;
  auto q_like = [&](const char* n, TensorRole r) { return tensor(g, n, {a.b, a.sq, a.heads, a.d}, t, r); };
  auto kv_like = [&](const char* n, TensorRole r) { return tensor(g, n, {a.b, a.skv, a.kv_heads, a.d}, t, r); };
  Op o;
  o.dtype = t;
  o.attrs.batch = a.b, o.attrs.seq_q = a.sq, o.attrs.seq_kv = a.skv;
  o.attrs.heads = a.heads, o.attrs.kv_heads = a.kv_heads, o.attrs.head_dim = a.d, o.attrs.causal = true;
  const int q = q_like("q", TensorRole::input), k = kv_like("k", TensorRole::input), v = kv_like("v", TensorRole::input);
  if (!backward) {
    o.name = "flash", o.kind = OpKind::flash_attention;
    o.inputs = {q, k, v};
    o.outputs = {q_like("o", TensorRole::activation),
                 tensor(g, "lse", {a.b, a.heads, a.sq}, DType::fp32, TensorRole::activation)};
  } else {
    o.name = "flash_bwd", o.kind = OpKind::flash_attention_bwd;
    const int out = q_like("o", TensorRole::input), d_o = q_like("do", TensorRole::input);
    const int lse = tensor(g, "lse", {a.b, a.heads, a.sq}, DType::fp32, TensorRole::input);
    o.inputs = {q, k, v, out, d_o, lse};
    o.outputs = {q_like("dq", TensorRole::activation), kv_like("dk", TensorRole::activation),
                 kv_like("dv", TensorRole::activation)};
  }
  g.add_op(o);
  return g;
}

// C[m, n] (+)= A[m, k] · B[k, n] computed in `compute`, with each operand's own dtype.
Graph gemm(int64_t m, int64_t n, int64_t k, DType compute, DType a, DType b, DType c, bool accumulate) {
  Graph g;
  const int ia = tensor(g, "a", {m, k}, a, TensorRole::input);
  const int ib = tensor(g, "b", {k, n}, b, TensorRole::weight);
  const int ic = tensor(g, "c", {m, n}, c, accumulate ? TensorRole::gradient : TensorRole::activation);
  Op o;
  o.name = "gemm", o.kind = OpKind::gemm, o.dtype = compute;
  o.attrs.m = m, o.attrs.n = n, o.attrs.k = k, o.attrs.accumulate = accumulate;
  o.inputs = accumulate ? std::vector<int>{ia, ib, ic} : std::vector<int>{ia, ib};
  o.outputs = {ic};
  g.add_op(o);
  return g;
}

}  // namespace

TEST_CASE("workspace: norm backward at 8192 x 4096 on H100-SXM") {
  // 2 partial sets (dgamma, dbeta) × min(8192, 512) blocks × 4096 columns × 4 bytes = 16 MiB.
  for (OpKind kind : {OpKind::rmsnorm_bwd, OpKind::layernorm_bwd}) {
    const Graph g = norm_bwd(8192, 4096, DType::bf16, kind);
    CHECK(workspace_bytes(g.ops[0], g, h100()) == 16.0 * 1024 * 1024);
  }
  // Fewer rows than 512: one block per row. 7 rows × 1000 cols: 2·7·1000·4 = 56000 B, rounded
  // up to the 256-byte piece boundary: 56064.
  const Graph small = norm_bwd(7, 1000, DType::fp32);
  CHECK(workspace_bytes(small.ops[0], small, h100()) == 56064);
}

TEST_CASE("workspace: flash attention backward and split-KV decode") {
  // dQ accumulators 2·1024·16·128·4 = 16777216 B and D 2·16·1024·4 = 131072 B; the GQA group
  // of 4 splits over CTAs: fp32 dK and dV accumulators, 2 × 2·1024·4·128·4 = 8388608 B.
  const Graph bwd = flash({2, 1024, 1024, 16, 4, 128}, true);
  CHECK(workspace_bytes(bwd.ops[0], bwd, h100()) == 16777216.0 + 131072.0 + 8388608.0);
  // Without GQA nothing splits. dQ 1·100·4·64·4 = 102400 B, D 1·4·100·4 = 1600 B: 104000 B,
  // up to the 256-byte piece boundary: 104192.
  const Graph mha = flash({1, 100, 100, 4, 4, 64}, true);
  CHECK(workspace_bytes(mha.ops[0], mha, h100()) == 104192);
  // GQA at a head_dim the tensor-core kernel lacks (96): the fallback, nothing splits.
  // dQ 153600 + D 1600 = 155200 B -> 155392.
  const Graph odd = flash({1, 100, 100, 4, 2, 96}, true);
  CHECK(workspace_bytes(odd.ops[0], odd, h100()) == 155392);
  // D rounds up to 16 bytes before the split's accumulators: 1·4·99·4 = 1584 -> 1600 B;
  // dQ 1·99·4·64·4 = 101376 B; dK/dV 2 × 1·99·2·64·4 = 101376 B: 204352 B -> 204544.
  const Graph round = flash({1, 99, 99, 4, 2, 64}, true);
  CHECK(workspace_bytes(round.ops[0], round, h100()) == 204544);
  // Decode, 1 query row, 8 kv heads: 4·132 = 528 CTAs / 8 = 66 splits by grid, 4096 / 64 =
  // 64 by length -> 64 splits × 32 heads × (128 + 2) floats = 1064960 B.
  const Graph dec = flash({1, 1, 4096, 32, 8, 128}, false);
  CHECK(workspace_bytes(dec.ops[0], dec, h100()) == 64.0 * 32 * 130 * 4);
  // Half the SMs: 264 / 8 = 33 splits by grid.
  Hardware half = h100();
  half.sm_count = 66;
  CHECK(workspace_bytes(dec.ops[0], dec, half) == 33.0 * 32 * 130 * 4);
  // A prefill-sized forward runs the flash kernel: no workspace.
  const Graph fwd = flash({2, 1024, 1024, 16, 4, 128}, false);
  CHECK(workspace_bytes(fwd.ops[0], fwd, h100()) == 0);
}

TEST_CASE("workspace: gemm with accumulate stages C only when cuBLASLt cannot write it") {
  // fp32 inputs accumulating into a bf16 C: C goes through an fp32 copy, 1000·300·4 =
  // 1200000 B, rounded to 256: 1200128.
  const Graph staged = gemm(1000, 300, 64, DType::fp32, DType::fp32, DType::fp32, DType::bf16, true);
  CHECK(workspace_bytes(staged.ops[0], staged, h100()) == 1200128);
  // bf16 inputs accumulating into an fp32 C (gradient accumulation): written directly.
  const Graph direct = gemm(1000, 300, 64, DType::bf16, DType::bf16, DType::bf16, DType::fp32, true);
  CHECK(workspace_bytes(direct.ops[0], direct, h100()) == 0);
  // A bf16 GEMM reading an fp32 weight B [64, 300]: B converted to bf16, 64·300·2 = 38400 B.
  const Graph master = gemm(1000, 300, 64, DType::bf16, DType::bf16, DType::fp32, DType::bf16, false);
  CHECK(workspace_bytes(master.ops[0], master, h100()) == 38400);
  // fp8: 1 KiB of scale lines, A (float, 1000·64 = 64000 elements ≤ 65536: one block, no
  // partials) quantized to 64000 B, B (an e4m3 weight stored transposed) read in place.
  const Graph fp8 = gemm(1000, 304, 64, DType::fp8, DType::bf16, DType::fp8, DType::bf16, false);
  CHECK(fp8_b_stored_transposed(fp8)[1] == 1);
  CHECK(workspace_bytes(fp8.ops[0], fp8, h100()) == 1024 + 64000);
  // fp8 scales: one 256-byte line per fp8 tensor, beside cuBLASLt's 32 MiB.
  const PersistentWorkspace p = persistent_workspace(fp8, h100());
  CHECK(p.fp8_scales == 256);
  CHECK(p.gemm_library == 32.0 * 1024 * 1024);
  CHECK(p.attention_library == 0);
  CHECK(p.total() == 32.0 * 1024 * 1024 + 256);
}

TEST_CASE("operands whose dtype the op fixes: ids, targets and block tables int32, loss and LSE fp32") {
  CHECK(fixed_operand_dtype(OpKind::embedding, false, 0) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::embedding_bwd, false, 0) == DType::int32);
  CHECK_FALSE(fixed_operand_dtype(OpKind::embedding, false, 1));  // the table follows the precision
  CHECK(fixed_operand_dtype(OpKind::cross_entropy, false, 1) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::cross_entropy, true, 0) == DType::fp32);
  CHECK_FALSE(fixed_operand_dtype(OpKind::cross_entropy, true, 1));  // dlogits
  CHECK(fixed_operand_dtype(OpKind::flash_attention, true, 1) == DType::fp32);
  CHECK(fixed_operand_dtype(OpKind::paged_flash_attention, true, 1) == DType::fp32);
  CHECK(fixed_operand_dtype(OpKind::paged_flash_attention, false, 3) == DType::int32);  // the block table
  CHECK_FALSE(fixed_operand_dtype(OpKind::paged_flash_attention, false, 1));           // the pages
  for (std::size_t i = 3; i < 6; ++i) CHECK(fixed_operand_dtype(OpKind::varlen_flash_attention, false, i) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_flash_attention, true, 1) == DType::fp32);
  CHECK(fixed_operand_dtype(OpKind::paged_kv_append, false, 2) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_kv_append, false, 2) == DType::int32);   // the slots
  CHECK(fixed_operand_dtype(OpKind::varlen_rope, false, 1) == DType::int32);        // positions
  CHECK(fixed_operand_dtype(OpKind::varlen_slice_last_token, false, 1) == DType::int32);
  CHECK_FALSE(fixed_operand_dtype(OpKind::varlen_rope, false, 0));
  CHECK(fixed_operand_dtype(OpKind::flash_attention_bwd, false, 5) == DType::fp32);
  CHECK_FALSE(fixed_operand_dtype(OpKind::gemm, false, 0));
  CHECK_FALSE(fixed_operand_dtype(OpKind::rmsnorm, true, 0));
}

TEST_CASE("workspace: a CPU profile has none") {
  const Graph g = norm_bwd(8192, 4096, DType::bf16);
  CHECK(workspace_bytes(g.ops[0], g, cpu_profile()) == 0);
  CHECK(persistent_workspace(g, cpu_profile()).total() == 0);
  const MemoryBreakdown with_cpu = predict_memory(g, cpu_profile(), false);
  const MemoryBreakdown without = predict_memory(g, false);
  CHECK(with_cpu.peak == without.peak);
  CHECK(with_cpu.by_role.at(TensorRole::workspace) == 0);
}

TEST_CASE("memory model: the peak holds the workspace of the op at the peak") {
  // rmsnorm_bwd on [4, 8] fp32: x, dy 128 B each, gamma 32 B, dgamma 32 B (persistent),
  // dx 128 B (activation); workspace 2·4·8·4 = 256 B; cuBLASLt's 32 MiB all step.
  const Graph g = norm_bwd(4, 8, DType::fp32);
  const double library = 32.0 * 1024 * 1024;
  const MemoryBreakdown m = predict_memory(g, h100(), false);
  CHECK(m.peak == 128 + 128 + 32 + 32 + 128 + 256 + library);
  CHECK(m.by_role.at(TensorRole::workspace) == 256 + library);
  CHECK(m.by_role.at(TensorRole::activation) == 128);
  CHECK(m.peak_at == "norm_bwd");
  // The hardware-free form knows no workspace.
  CHECK(predict_memory(g, false).peak == 128 + 128 + 32 + 32 + 128);
}

TEST_CASE("memory model: a side-stream op's workspace is held to the end of the step") {
  // Two norm backwards on [4, 8]: with both on stream 0 each workspace (256 B) is freed after
  // its op; with the first on a side stream its workspace is still held when the second runs.
  Graph g = norm_bwd(4, 8, DType::fp32);
  Op second = g.ops[0];
  second.name = "norm_bwd2";
  second.outputs = {g.add_tensor({-1, "dx2", {4, 8}, DType::fp32, TensorRole::activation, 1}),
                    g.add_tensor({-1, "dgamma2", {8}, DType::fp32, TensorRole::gradient, 1})};
  g.add_op(second);
  const double base = 128 + 128 + 32 + 32 + 32 + 32.0 * 1024 * 1024;  // persistent + library
  const MemoryBreakdown one_stream = predict_memory(g, h100(), false);
  CHECK(one_stream.peak == base + 128 + 256);  // dx, dx2 never read: freed after their op
  g.ops[0].stream = 1;
  const MemoryBreakdown side = predict_memory(g, h100(), false);
  // dx is kept (last use on a side stream) and so is the first op's workspace.
  CHECK(side.peak == base + 128 + 128 + 256 + 256);  // dx, dx2, both workspaces
  CHECK(side.peak_at == "norm_bwd2");
  CHECK(side.by_role.at(TensorRole::workspace) == 512 + 32.0 * 1024 * 1024);
}
