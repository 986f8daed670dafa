// Mixture-of-experts layers (Shazeer et al. 2017; GShard, Lepikhin et al. 2020; Switch
// Transformer, Fedus et al. 2021; Mixtral, Jiang et al. 2024): a linear router picks each
// token's top-k experts, the tokens are dispatched into fixed-capacity buffers per expert, the
// experts run as one batched GEMM per projection, and their outputs are combined with the
// routing weights. Expert parallelism (Megatron-Core's all-to-all dispatcher) splits the experts
// over ep ranks: an all-to-all sends each expert's buffer to the rank holding it and another
// brings the outputs back. Shared experts (Qwen-MoE, DeepSeekMoE) are a dense MLP beside them.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/builders/common.hpp"

namespace perfsim::build {

OpAttrs GraphBuilder::moe_attrs(int64_t tokens, int64_t cols, int64_t capacity) const {
  OpAttrs a;
  a.experts = m_rank.experts;
  a.top_k = m_rank.top_k;
  a.capacity = capacity;
  a.rows = tokens;
  a.cols = cols;
  a.elements = tokens * cols;
  return a;
}

int GraphBuilder::expert_param(std::string name, std::vector<int64_t> shape, int width_dim, int layer) {
  const RankShape& r = m_rank;
  const int id = param(name, shape, layer, true);
  // Outermost first: the ep ranks split the experts, then the tp ranks each expert's width.
  std::vector<Shard> parts;
  std::vector<int64_t> experts_part = shape;
  experts_part[static_cast<std::size_t>(width_dim)] *= r.tp;
  if (r.expert_parallel()) {
    std::vector<int64_t> whole = experts_part;
    whole[0] *= r.ep;
    parts.push_back(Shard{name, std::move(whole), 0, r.ep, r.ep_stride});
  }
  if (r.tensor_parallel()) parts.push_back(Shard{name, std::move(experts_part), width_dim, r.tp, r.tp_stride});
  m_graph.tensor(id).shard = std::move(parts);
  return id;
}

void GraphBuilder::add_expert_weights(int l, LayerWeights& lw) {
  const RankShape& r = m_rank;
  const int64_t h = m_model.hidden, e = r.local_experts, f = r.expert_ffn;
  // The router is whole on every rank: each routes all the tokens it dispatches.
  lw.router = param(lname(l, "mlp.router.weight"), {h, r.experts}, l);
  auto n = [&](const char* what) { return lname(l, what); };
  // Column-parallel gate/up/fc1 split their outputs (dim 2), row-parallel down/fc2 their inputs.
  if (m_model.activation == Activation::swiglu) {
    lw.expert_gate = expert_param(n("mlp.experts.gate_proj.weight"), {e, h, f}, 2, l);
    lw.expert_up = expert_param(n("mlp.experts.up_proj.weight"), {e, h, f}, 2, l);
    lw.expert_down = expert_param(n("mlp.experts.down_proj.weight"), {e, f, h}, 1, l);
  } else {
    lw.expert_gate = expert_param(n("mlp.experts.fc1.weight"), {e, h, f}, 2, l);
    lw.expert_down = expert_param(n("mlp.experts.fc2.weight"), {e, f, h}, 1, l);
  }
}

int GraphBuilder::expert_linear(const std::string& name, int x, int w, int64_t rows, int64_t n, int64_t k,
                                int layer, double useful) {
  const int64_t e = m_rank.local_experts;
  const int y = tensor(name + ".out", {e, rows, n}, TensorRole::activation);
  OpAttrs a;
  a.batch = e;
  a.m = rows, a.n = n, a.k = k;
  a.model_share = useful;
  op(OpKind::gemm, name, {x, w}, {y}, a, layer, Stage::forward);
  return y;
}

int GraphBuilder::ep_all_to_all(const std::string& name, int x, std::vector<int64_t> out_shape, int layer,
                                Stage stage) {
  const std::string op_name = name + ".all_to_all";
  const int y = tensor(op_name + ".out", std::move(out_shape), TensorRole::activation, -1, m_graph.tensor(x).dtype);
  OpAttrs a;
  a.collective = Collective::all_to_all;
  a.group = m_rank.ep;
  a.group_stride = m_rank.ep_stride;
  op(OpKind::collective, op_name, {x}, {y}, a, layer, stage);
  return y;
}

int GraphBuilder::moe_forward(int l, LayerActivations& a, const LayerWeights& lw, int64_t t) {
  const RankShape& r = m_rank;
  const int64_t h = m_model.hidden, e = r.experts, el = r.local_experts, k = r.top_k, f = r.expert_ffn;
  auto n = [&](const char* what) { return lname(l, what); };
  LayerActivations::Experts& x = a.moe;
  x.capacity = r.expert_capacity(t);
  x.useful = std::min(1.0, static_cast<double>(t * k) / static_cast<double>(e * x.capacity));
  // Each local expert's rows: its buffer from every expert-parallel rank.
  const int64_t rows = r.ep * x.capacity;

  x.logits = linear(n("mlp.router"), a.mlp_in, lw.router, t, e, h, l);
  x.weights = tensor(n("mlp.route.weights"), {t, k}, TensorRole::activation, -1, DType::fp32);
  x.choice = tensor(n("mlp.route.experts"), {t, k}, TensorRole::activation, -1, DType::int32);
  x.slots = tensor(n("mlp.route.slots"), {t, k}, TensorRole::activation, -1, DType::int32);
  op(OpKind::moe_route, n("mlp.route"), {x.logits}, {x.weights, x.choice, x.slots}, moe_attrs(t, e, x.capacity), l,
     Stage::forward);
  x.dispatched = tensor(n("mlp.dispatch.out"), {e, x.capacity, h}, TensorRole::activation);
  op(OpKind::moe_dispatch, n("mlp.dispatch"), {a.mlp_in, x.choice, x.slots}, {x.dispatched},
     moe_attrs(t, h, x.capacity), l, Stage::forward);
  x.input = r.expert_parallel() ? ep_all_to_all(n("mlp.dispatch"), x.dispatched, {el, rows, h}, l, Stage::forward)
                                : x.dispatched;

  OpAttrs pa;
  pa.elements = el * rows * f;
  pa.model_share = x.useful;
  const bool swiglu = m_model.activation == Activation::swiglu;
  if (swiglu) {
    x.gate = expert_linear(n("mlp.experts.gate_proj"), x.input, lw.expert_gate, rows, f, h, l, x.useful);
    x.up = expert_linear(n("mlp.experts.up_proj"), x.input, lw.expert_up, rows, f, h, l, x.useful);
    x.act = tensor(n("mlp.experts.silu_mul.out"), {el, rows, f}, TensorRole::activation);
    op(OpKind::silu_mul, n("mlp.experts.silu_mul"), {x.gate, x.up}, {x.act}, pa, l, Stage::forward);
  } else {
    x.gate = expert_linear(n("mlp.experts.fc1"), x.input, lw.expert_gate, rows, f, h, l, x.useful);
    x.act = tensor(n("mlp.experts.gelu.out"), {el, rows, f}, TensorRole::activation);
    op(OpKind::gelu, n("mlp.experts.gelu"), {x.gate}, {x.act}, pa, l, Stage::forward);
  }
  const char* down = swiglu ? "mlp.experts.down_proj" : "mlp.experts.fc2";
  x.output = expert_linear(n(down), x.act, lw.expert_down, rows, h, f, l, x.useful);
  x.returned = r.expert_parallel() ? ep_all_to_all(n(down), x.output, {e, x.capacity, h}, l, Stage::forward)
                                   : x.output;
  x.combined = tensor(n("mlp.combine.out"), {t, h}, TensorRole::activation);
  op(OpKind::moe_combine, n("mlp.combine"), {x.returned, x.choice, x.slots, x.weights}, {x.combined},
     moe_attrs(t, h, x.capacity), l, Stage::forward);
  if (r.shared_ffn == 0) return x.combined;

  // Shared experts: every token, a dense MLP of their combined width, added to the routed ones.
  const int shared = dense_mlp(l, a, lw, a.mlp_in, t, r.shared_ffn, "mlp.shared");
  const int sum = tensor(n("mlp.shared.sum.out"), {t, h}, TensorRole::activation);
  OpAttrs sa;
  sa.elements = t * h;
  op(OpKind::residual_add, n("mlp.shared.sum"), {x.combined, shared}, {sum}, sa, l, Stage::forward);
  return sum;
}

}  // namespace perfsim::build
