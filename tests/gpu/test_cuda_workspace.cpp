// core/cost/workspace.cpp mirrors the kernels' workspace size functions (the core library cannot
// call CUDA code): the two must agree on the device, shape by shape.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/kernels/decode_attention.cuh"
#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"
#include "backends/cuda/kernels/norms.cuh"
#include "core/cost/workspace.hpp"

using namespace perfsim;

namespace {

double aligned(int64_t bytes) {
  return static_cast<double>((bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment);
}

int tensor(Graph& g, const std::string& name, std::vector<int64_t> shape, DType t, TensorRole role) {
  return g.add_tensor({-1, name, std::move(shape), t, role, 1});
}

// One attention op on bf16 operands of the shape `a` (GQA, causal).
Graph attention(const ops::AttnShape& a, OpKind kind) {
  Graph g;
  const DType t = DType::bf16;
  auto q_like = [&](const char* n) { return tensor(g, n, {a.batch, a.seq_q, a.heads, a.head_dim}, t, TensorRole::input); };
  auto kv_like = [&](const char* n) {
    return tensor(g, n, {a.batch, a.seq_kv, a.kv_heads, a.head_dim}, t, TensorRole::input);
  };
  const int lse = tensor(g, "lse", {a.batch, a.heads, a.seq_q}, DType::fp32, TensorRole::input);
  Op o;
  o.name = "attn", o.kind = kind, o.dtype = t;
  o.attrs.batch = a.batch, o.attrs.seq_q = a.seq_q, o.attrs.seq_kv = a.seq_kv;
  o.attrs.heads = a.heads, o.attrs.kv_heads = a.kv_heads, o.attrs.head_dim = a.head_dim, o.attrs.causal = true;
  if (kind == OpKind::flash_attention) {
    o.inputs = {q_like("q"), kv_like("k"), kv_like("v")};
    o.outputs = {q_like("o"), lse};
  } else {
    o.inputs = {q_like("q"), kv_like("k"), kv_like("v"), q_like("o"), q_like("do"), lse};
    o.outputs = {q_like("dq"), kv_like("dk"), kv_like("dv")};
  }
  g.add_op(o);
  return g;
}

}  // namespace

TEST_CASE("cuda workspace: core's sizes equal the kernels' size functions") {
  const Hardware hw = cuda::device_profile(0);
  SUBCASE("norm backward") {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{8192, 4096}, {7, 1000}, {511, 64}, {513, 2048}}) {
      CAPTURE(rows);
      Graph g;
      const int x = tensor(g, "x", {rows, cols}, DType::bf16, TensorRole::input);
      const int gamma = tensor(g, "gamma", {cols}, DType::bf16, TensorRole::weight);
      const int dy = tensor(g, "dy", {rows, cols}, DType::bf16, TensorRole::input);
      Op o;
      o.name = "norm_bwd", o.kind = OpKind::rmsnorm_bwd, o.dtype = DType::bf16;
      o.inputs = {x, gamma, dy};
      o.outputs = {tensor(g, "dx", {rows, cols}, DType::bf16, TensorRole::activation),
                   tensor(g, "dgamma", {cols}, DType::bf16, TensorRole::gradient)};
      g.add_op(o);
      CHECK(workspace_bytes(g.ops[0], g, hw) == aligned(cuda::norm_bwd_workspace_floats(rows, cols) * 4));
    }
  }
  SUBCASE("flash attention backward and split-KV decode") {
    for (const ops::AttnShape& base : {ops::AttnShape{2, 1024, 1024, 16, 4, 128}, ops::AttnShape{1, 1, 4096, 32, 8, 128},
                                       ops::AttnShape{3, 4, 777, 8, 8, 64}, ops::AttnShape{64, 1, 300, 32, 8, 128}}) {
      ops::AttnShape a = base;
      a.causal = true, a.kv_capacity = a.seq_kv, a.grad_capacity = a.seq_kv;
      CAPTURE(a.batch);
      CAPTURE(a.seq_q);
      const Graph bwd = attention(a, OpKind::flash_attention_bwd);
      CHECK(workspace_bytes(bwd.ops[0], bwd, hw) == aligned(cuda::flash_attention_bwd_workspace_bytes(a, 2)));
      const Graph fwd = attention(a, OpKind::flash_attention);
      const double decode = a.seq_q <= decode_kernel_max_seq_q ? aligned(cuda::decode_attention_workspace_bytes(a)) : 0;
      CHECK(workspace_bytes(fwd.ops[0], fwd, hw) == decode);
    }
  }
  SUBCASE("embedding backward") {
    ops::EmbeddingShape e;
    e.tokens = 16, e.vocab = 1000, e.hidden = 64, e.max_positions = 32, e.seq = 8;
    for (DType t : {DType::fp32, DType::bf16}) {
      Graph g;
      const int ids = tensor(g, "ids", {e.tokens}, DType::int32, TensorRole::input);
      const int dx = tensor(g, "dx", {e.tokens, e.hidden}, t, TensorRole::input);
      Op o;
      o.name = "emb_bwd", o.kind = OpKind::embedding_bwd, o.dtype = t;
      o.inputs = {ids, dx};
      o.outputs = {tensor(g, "dtable", {e.vocab, e.hidden}, t, TensorRole::gradient),
                   tensor(g, "dpos", {e.max_positions, e.hidden}, t, TensorRole::gradient)};
      g.add_op(o);
      const int64_t floats = t == DType::fp32 ? cuda::embedding_bwd_workspace_floats<float>(e, true)
                                              : cuda::embedding_bwd_workspace_floats<__nv_bfloat16>(e, true);
      CHECK(workspace_bytes(g.ops[0], g, hw) == aligned(floats * 4));
    }
  }
}
