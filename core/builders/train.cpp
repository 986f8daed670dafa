// The training graph: forward over the micro-batch, cross-entropy, backward in reverse layer
// order (dgrad + wgrad per linear layer), then the unfused AdamW baseline (one multi-pass op
// per parameter tensor). Under tensor parallelism each layer's backward mirrors the forward's
// collectives; under context parallelism the rank's share of the tokens runs through it, with
// ring attention's backward; a pipeline stage receives its input and its output's gradient and
// sends the others on.
#include <fmt/format.h>

#include <map>

#include "core/builders/builders.hpp"
#include "core/builders/common.hpp"
#include "core/graph/rewrite.hpp"

namespace perfsim {

using build::AttentionShape;
using build::GraphBuilder;
using build::LayerActivations;
using build::LayerWeights;
using build::ModelWeights;
using build::NormWeights;
using build::RankShape;

namespace {

// Adds the backward ops. Weight gradients are created on first use (role gradient, same
// shape and count as the weight).
class BackwardBuilder {
 public:
  BackwardBuilder(GraphBuilder& b, const AttentionShape& s, bool accumulate)
      : m_b(b), m_m(b.model()), m_r(b.rank()), m_shape(s), m_tokens(s.batch * s.seq_q),
        m_accumulate(accumulate) {}

  int grad_of(int weight, int layer) {
    auto it = m_grads.find(weight);
    if (it != m_grads.end()) return it->second;
    const Tensor& w = m_b.graph().tensor(weight);
    const std::string name = w.name + ".grad";
    const std::vector<int64_t> shape = w.shape;
    // A tensor-parallel weight's gradient is the same part of the whole's gradient.
    std::vector<Shard> shard = w.shard;
    for (Shard& s : shard) s.of = name;
    const int g = m_b.tensor(name, shape, TensorRole::gradient, layer);  // may move `w`
    m_b.graph().tensor(g).shard = std::move(shard);
    m_grads.emplace(weight, g);
    return g;
  }

  // Forward Y[m, n] = X[m, k] · W[k, n]. dX = dY · W^T, dW (+)= X^T · dY. Returns dX.
  // Under sequence parallelism X of a column-parallel GEMM is the re-gathered norm output.
  int linear(const std::string& name, int dy, int x, int w, int64_t m, int64_t n, int64_t k,
             int layer) {
    const int dx = m_b.tensor(name + ".dgrad.out", {m, k}, TensorRole::activation);
    OpAttrs d;
    d.m = m, d.n = k, d.k = n;
    d.trans_b = true;  // W stored [k, n] is op(B)^T
    m_b.op(OpKind::gemm, name + ".dgrad", {dy, w}, {dx}, d, layer, Stage::backward);
    wgrad(name, x, dy, w, k, n, m, /*trans_a=*/true, layer);
    return dx;
  }

  // dW[m, n] (+)= op(A) · B; with `accumulate` the gradient is also read (grad_accum > 1).
  void wgrad(const std::string& name, int a_in, int b_in, int w, int64_t m, int64_t n, int64_t k,
             bool trans_a, int layer) {
    const int gw = grad_of(w, layer);
    OpAttrs a;
    a.m = m, a.n = n, a.k = k;
    a.trans_a = trans_a;
    a.accumulate = m_accumulate;
    std::vector<int> in{a_in, b_in};
    if (m_accumulate) in.push_back(gw);
    m_b.op(OpKind::gemm, name + ".wgrad", std::move(in), {gw}, a, layer, Stage::backward);
  }

  int norm(const std::string& name, int x, const NormWeights& nw, int dy, int64_t rows, int layer) {
    const int dx = m_b.activation_like(name + ".bwd.out", x);
    OpAttrs a;
    a.rows = rows;
    a.cols = m_m.hidden;
    a.elements = rows * m_m.hidden;
    std::vector<int> grads{grad_of(nw.gamma, layer)};
    if (m_m.norm == NormKind::layernorm) grads.push_back(grad_of(nw.beta, layer));
    // The norm kernels write their weights' gradients: over several micro-batches each one's
    // goes to a buffer of its own and is added to the accumulated gradient.
    std::vector<int> out{dx};
    for (int gw : grads) out.push_back(m_accumulate ? m_b.activation_like(m_b.graph().tensor(gw).name + ".part", gw) : gw);
    m_b.op(m_m.norm == NormKind::layernorm ? OpKind::layernorm_bwd : OpKind::rmsnorm_bwd, name + ".bwd",
           {x, nw.gamma, dy}, out, a, layer, Stage::backward);
    if (m_accumulate)
      for (std::size_t i = 0; i < grads.size(); ++i) {
        OpAttrs add;
        add.elements = m_b.graph().tensor(grads[i]).elements();
        m_b.op(OpKind::residual_add, m_b.graph().tensor(grads[i]).name + ".accumulate", {grads[i], out[i + 1]},
               {grads[i]}, add, layer, Stage::backward);
      }
    return dx;
  }

  int add(const std::string& name, int a, int b, int layer) {
    const int y = m_b.activation_like(name + ".out", a);
    OpAttrs at;
    at.elements = m_b.graph().tensor(a).elements();
    m_b.op(OpKind::residual_add, name, {a, b}, {y}, at, layer, Stage::backward);
    return y;
  }

  // A dense MLP's backward (of width f, `prefix` "mlp" or "mlp.shared") from the gradient of
  // its output dy [T, h], x_in the [T, h] its first GEMMs read; returns the partial dX [T, h].
  int mlp(int l, int gate, int up, int act, const LayerWeights& lw, int dy, int x_in, int64_t f,
          const std::string& prefix) {
    const int64_t t = m_tokens, h = m_m.hidden;
    auto n = [&](const char* what) { return m_b.lname(l, prefix + what); };
    OpAttrs pa;
    pa.elements = t * f;
    if (m_m.activation == Activation::swiglu) {
      const int dact = linear(n(".down_proj"), dy, act, lw.down, t, h, f, l);
      const int dgate = m_b.activation_like(n(".silu_mul.bwd.gate"), gate);
      const int dup = m_b.activation_like(n(".silu_mul.bwd.up"), up);
      m_b.op(OpKind::silu_mul_bwd, n(".silu_mul.bwd"), {gate, up, dact}, {dgate, dup}, pa, l, Stage::backward);
      const int du = linear(n(".up_proj"), dup, x_in, lw.up, t, f, h, l);
      const int dg = linear(n(".gate_proj"), dgate, x_in, lw.gate, t, f, h, l);
      return add(n(".grad_sum"), dg, du, l);
    }
    const int dact = linear(n(".fc2"), dy, act, lw.down, t, h, f, l);
    const int dfc1 = m_b.activation_like(n(".gelu.bwd.out"), gate);
    m_b.op(OpKind::gelu_bwd, n(".gelu.bwd"), {gate, dact}, {dfc1}, pa, l, Stage::backward);
    return linear(n(".fc1"), dfc1, x_in, lw.gate, t, f, h, l);
  }

  // The experts' batched linear backward: Y[El, rows, n] = X[El, rows, k] · W[El, k, n].
  // dX = dY · W^T per expert, dW (+)= X^T · dY. Returns dX.
  int expert_linear(const std::string& name, int dy, int x, int w, int64_t rows, int64_t n, int64_t k, int layer,
                    double useful) {
    const int64_t e = m_r.local_experts;
    const int dx = m_b.tensor(name + ".dgrad.out", {e, rows, k}, TensorRole::activation);
    OpAttrs d;
    d.batch = e;
    d.m = rows, d.n = k, d.k = n;
    d.trans_b = true;
    d.model_share = useful;
    m_b.op(OpKind::gemm, name + ".dgrad", {dy, w}, {dx}, d, layer, Stage::backward);
    const int gw = grad_of(w, layer);
    OpAttrs g;
    g.batch = e;
    g.model_share = useful;
    g.m = k, g.n = n, g.k = rows;
    g.trans_a = true;
    g.accumulate = m_accumulate;
    std::vector<int> in{x, dy};
    if (m_accumulate) in.push_back(gw);
    m_b.op(OpKind::gemm, name + ".wgrad", std::move(in), {gw}, g, layer, Stage::backward);
    return dx;
  }

  // An MoE MLP's backward from dy [T, h] (moe.cpp builds its forward): the combine, the
  // experts (their gradients sent back over the all-to-all under expert parallelism), the
  // dispatch, the routing and the router, and the shared experts beside them. Returns the
  // partial dX [T, h] that leave_tp sums.
  int moe(int l, const LayerActivations& a, const LayerWeights& lw, int dy) {
    const int64_t t = m_tokens, h = m_m.hidden, e = m_r.experts, k = m_r.top_k, el = m_r.local_experts,
                  f = m_r.expert_ffn;
    const LayerActivations::Experts& x = a.moe;
    const int64_t rows = m_r.ep * x.capacity;
    auto n = [&](const char* what) { return m_b.lname(l, what); };
    const bool swiglu = m_m.activation == Activation::swiglu;

    // Each expert's weight gradient sums the tokens of the ep ranks: the gradient goes into the
    // experts scaled by 1/ep and comes out of them scaled back (OpAttrs::expert_grad_scale).
    OpAttrs buffers_bwd = m_b.moe_attrs(t, h, x.capacity);
    buffers_bwd.expert_grad_scale = 1.0 / static_cast<double>(m_r.ep);
    const int dreturned = m_b.activation_like(n("mlp.combine.bwd.dexperts"), x.returned);
    const int dweights = m_b.tensor(n("mlp.combine.bwd.dweights"), {t, k}, TensorRole::activation, -1, DType::fp32);
    m_b.op(OpKind::moe_combine_bwd, n("mlp.combine.bwd"), {dy, x.returned, x.choice, x.slots, x.weights},
           {dreturned, dweights}, buffers_bwd, l, Stage::backward);
    const char* down = swiglu ? "mlp.experts.down_proj" : "mlp.experts.fc2";
    const int doutput = m_r.expert_parallel()
                            ? m_b.ep_all_to_all(n("mlp.combine.bwd"), dreturned, {el, rows, h}, l, Stage::backward)
                            : dreturned;
    const int dact = expert_linear(n(down), doutput, x.act, lw.expert_down, rows, h, f, l, x.useful);
    OpAttrs pa;
    pa.elements = el * rows * f;
    pa.model_share = x.useful;
    int dinput = -1;
    if (swiglu) {
      const int dgate = m_b.activation_like(n("mlp.experts.silu_mul.bwd.gate"), x.gate);
      const int dup = m_b.activation_like(n("mlp.experts.silu_mul.bwd.up"), x.up);
      m_b.op(OpKind::silu_mul_bwd, n("mlp.experts.silu_mul.bwd"), {x.gate, x.up, dact}, {dgate, dup}, pa, l,
             Stage::backward);
      const int du = expert_linear(n("mlp.experts.up_proj"), dup, x.input, lw.expert_up, rows, f, h, l, x.useful);
      const int dg = expert_linear(n("mlp.experts.gate_proj"), dgate, x.input, lw.expert_gate, rows, f, h, l, x.useful);
      dinput = add(n("mlp.experts.grad_sum"), dg, du, l);
    } else {
      const int dfc1 = m_b.activation_like(n("mlp.experts.gelu.bwd.out"), x.gate);
      m_b.op(OpKind::gelu_bwd, n("mlp.experts.gelu.bwd"), {x.gate, dact}, {dfc1}, pa, l, Stage::backward);
      dinput = expert_linear(n("mlp.experts.fc1"), dfc1, x.input, lw.expert_gate, rows, f, h, l, x.useful);
    }
    const int ddispatched =
        m_r.expert_parallel()
            ? m_b.ep_all_to_all(n("mlp.dispatch.bwd"), dinput, {e, x.capacity, h}, l, Stage::backward)
            : dinput;
    const int dx_experts = m_b.activation_like(n("mlp.dispatch.bwd.out"), a.mlp_in);
    m_b.op(OpKind::moe_dispatch_bwd, n("mlp.dispatch.bwd"), {ddispatched, x.choice, x.slots}, {dx_experts},
           buffers_bwd, l, Stage::backward);
    const int dlogits = m_b.activation_like(n("mlp.route.bwd.out"), x.logits);
    m_b.op(OpKind::moe_route_bwd, n("mlp.route.bwd"), {x.logits, x.choice, dweights}, {dlogits},
           m_b.moe_attrs(t, e, x.capacity), l, Stage::backward);
    const int x_in = m_b.regather(n("mlp_norm"), a.xn2, t, l);
    // Under tensor parallelism dweights, and so dlogits, are this rank's partial sums (its share
    // of each expert's width): the router's input gradient stays partial, summed by leave_tp
    // with the experts', while its weight gradient needs the whole dlogits, all-reduced.
    const int dx_router = m_b.tensor(n("mlp.router.dgrad.out"), {t, h}, TensorRole::activation);
    OpAttrs d;
    d.m = t, d.n = h, d.k = e;
    d.trans_b = true;
    m_b.op(OpKind::gemm, n("mlp.router.dgrad"), {dlogits, lw.router}, {dx_router}, d, l, Stage::backward);
    const int dlogits_whole =
        m_r.tensor_parallel()
            ? m_b.tp_collective(n("mlp.route.bwd"), Collective::all_reduce, dlogits, {t, e}, l, Stage::backward)
            : dlogits;
    wgrad(n("mlp.router"), x_in, dlogits_whole, lw.router, h, e, t, /*trans_a=*/true, l);
    int dx = add(n("mlp.router.grad_sum"), dx_experts, dx_router, l);
    if (m_r.shared_ffn > 0) {
      const int dx_shared = mlp(l, a.gate, a.up, a.act, lw, dy, x_in, m_r.shared_ffn, "mlp.shared");
      dx = add(n("mlp.shared.grad_sum"), dx, dx_shared, l);
    }
    return dx;
  }

  // Backward of one layer; dy is the gradient of its output, returns that of its input.
  // Tensor parallelism: the row-parallel GEMMs' backward reads the whole output gradient
  // (all-gathered with sp), the column-parallel dgrads' partial sums are all-reduced
  // (reduce-scattered with sp) before the norm's backward.
  int layer(int l, const LayerActivations& a, const LayerWeights& lw, int dy) {
    const int64_t t = m_tokens, rows = m_r.rows(t), h = m_m.hidden, q = m_r.q_dim, kv = m_r.kv_dim,
                  f = m_r.ffn;
    auto n = [&](const char* what) { return m_b.lname(l, what); };

    // MLP block.
    const bool swiglu = m_m.activation == Activation::swiglu;
    const int dy_in = m_b.enter_tp(n(swiglu ? "mlp.down_proj.bwd" : "mlp.fc2.bwd"), dy, t, l, Stage::backward);
    int dxn2 = -1;
    if (m_r.moe()) {
      dxn2 = moe(l, a, lw, dy_in);
    } else {
      const int x_in = m_b.regather(n("mlp_norm"), a.xn2, t, l);
      dxn2 = mlp(l, a.gate, a.up, a.act, lw, dy_in, x_in, f, "mlp");
    }
    dxn2 = m_b.leave_tp(n("mlp.dgrad"), dxn2, t, l, Stage::backward);
    const int dx1_norm = norm(n("mlp_norm"), a.x1, lw.mlp_norm, dxn2, rows, l);
    const int dx1 = add(n("mlp.residual.bwd"), dy, dx1_norm, l);

    // Attention block.
    const int dx1_in = m_b.enter_tp(n("attn.o_proj.bwd"), dx1, t, l, Stage::backward);
    const int dctx = linear(n("attn.o_proj"), dx1_in, a.context, lw.o, t, h, q, l);
    int dq = -1, dk = -1, dv = -1;
    if (m_r.context_parallel()) {
      // Ring attention's backward (context_parallel.cpp).
      const GraphBuilder::RingGrads rg = m_b.ring_attention_bwd(l, a, dctx, m_shape);
      dq = rg.dq, dk = rg.dk, dv = rg.dv;
    } else {
      const OpAttrs aa = m_b.attention_attrs(m_shape);
      const int dprobs = m_b.activation_like(n("attn.context.bwd.dprobs"), a.probs);
      dv = m_b.activation_like(n("attn.context.bwd.dv"), a.v);
      m_b.op(OpKind::attn_context_bwd, n("attn.context.bwd"), {dctx, a.probs, a.v_src},
             {dprobs, dv}, aa, l, Stage::backward);
      const int dscores = m_b.activation_like(n("attn.softmax.bwd.out"), a.scores);
      m_b.op(OpKind::attn_softmax_bwd, n("attn.softmax.bwd"), {a.probs, dprobs}, {dscores},
             m_b.softmax_attrs(m_shape), l, Stage::backward);
      dq = m_b.activation_like(n("attn.scores.bwd.dq"), a.q_att);
      dk = m_b.activation_like(n("attn.scores.bwd.dk"), a.k_att);
      m_b.op(OpKind::attn_scores_bwd, n("attn.scores.bwd"), {dscores, a.q_att, a.k_src},
             {dq, dk}, aa, l, Stage::backward);
    }
    if (m_m.rope) {
      const int dq_in = m_b.activation_like(n("attn.rope_q.bwd.out"), a.q);
      m_b.op(OpKind::rope_bwd, n("attn.rope_q.bwd"), {dq}, {dq_in},
             m_b.rope_attrs(m_shape, m_r.heads), l, Stage::backward);
      const int dk_in = m_b.activation_like(n("attn.rope_k.bwd.out"), a.k);
      m_b.op(OpKind::rope_bwd, n("attn.rope_k.bwd"), {dk}, {dk_in},
             m_b.rope_attrs(m_shape, m_r.kv_heads), l, Stage::backward);
      dq = dq_in, dk = dk_in;
    }
    const int x_in = m_b.regather(n("attn_norm"), a.xn1, t, l);
    const int dxq = linear(n("attn.q_proj"), dq, x_in, lw.q, t, q, h, l);
    const int dxk = linear(n("attn.k_proj"), dk, x_in, lw.k, t, kv, h, l);
    const int dxv = linear(n("attn.v_proj"), dv, x_in, lw.v, t, kv, h, l);
    const int dqk = add(n("attn.qk_grad_sum"), dxq, dxk, l);
    int dxn1 = add(n("attn.qkv_grad_sum"), dqk, dxv, l);
    dxn1 = m_b.leave_tp(n("attn.qkv.dgrad"), dxn1, t, l, Stage::backward);
    const int dx_norm = norm(n("attn_norm"), a.x, lw.attn_norm, dxn1, rows, l);
    return add(n("attn.residual.bwd"), dx1, dx_norm, l);
  }

 private:
  GraphBuilder& m_b;
  const ModelConfig& m_m;
  const RankShape& m_r;
  AttentionShape m_shape;
  int64_t m_tokens;
  bool m_accumulate;
  std::map<int, int> m_grads;  // weight id -> gradient id
};

// Unfused AdamW baseline: one op per parameter tensor, four sweeps (m, v, update, decay).
void add_optimizer(GraphBuilder& b, BackwardBuilder& bw) {
  for (const auto& p : b.params()) {
    const Tensor w = b.graph().tensor(p.weight);
    const int grad = bw.grad_of(p.weight, p.layer);
    const int m = b.tensor(w.name + ".exp_avg", w.shape, TensorRole::optimizer_state, p.layer);
    const int v = b.tensor(w.name + ".exp_avg_sq", w.shape, TensorRole::optimizer_state, p.layer);
    OpAttrs a;
    a.elements = w.elements();
    a.passes = 4;
    b.op(OpKind::adamw, w.name + ".adamw", {p.weight, grad, m, v}, {p.weight, m, v}, a, p.layer,
         Stage::optimizer);
  }
}

// The model's end on the last virtual stage: final norm, head, loss (forward and gradient in
// one op), then the head's backward; returns the gradient of the last layer's output `x`.
int head_and_loss(GraphBuilder& b, BackwardBuilder& bw, const ModelWeights& mw, int x, int targets, int64_t t,
                  int64_t rows) {
  const RankShape& r = b.rank();
  const int64_t h = b.model().hidden, vocab = r.vocab;
  const int xf = b.norm("final_norm", x, mw.final_norm, rows, -1);
  const int logits = b.lm_head(b.enter_tp("final_norm", xf, t, -1, Stage::forward), mw, t);
  const int loss = b.tensor("cross_entropy.loss", {t}, TensorRole::activation);
  const int dlogits = b.tensor("cross_entropy.dlogits", {t, vocab}, TensorRole::activation);
  if (r.tensor_parallel())  // each rank holds its vocabulary columns of the whole logits
    for (int id : {logits, dlogits})
      b.graph().tensor(id).shard = {Shard{b.graph().tensor(id).name, {t, vocab * r.tp}, 1, r.tp, r.tp_stride}};
  OpAttrs ce;
  ce.rows = t;
  ce.cols = vocab;
  ce.elements = t * vocab;
  b.upload(targets);
  b.op(OpKind::cross_entropy, "cross_entropy", {logits, targets}, {loss, dlogits}, ce, -1, Stage::forward);
  if (r.tensor_parallel()) {
    // Vocab-parallel cross-entropy (Megatron): each rank holds a slice of the logits, so the
    // row maxima, the target logits and the sums of exponentials are all-reduced over [T] in
    // fp32. Modelled as one all-reduce of those 3·T values, after the op.
    OpAttrs ar;
    ar.collective = Collective::all_reduce;
    ar.group = r.tp;
    ar.group_stride = r.tp_stride;
    ar.payload_bytes = 3.0 * static_cast<double>(t) * bytes_of(DType::fp32);
    b.op(OpKind::collective, "cross_entropy.all_reduce", {loss}, {loss}, ar, -1, Stage::forward);
  }

  // Backward from the loss. Under sp the head's weight gradient reads the norm output
  // gathered again.
  const int head_in = b.regather("final_norm", xf, t, -1);
  int dx = -1;
  if (mw.lm_head >= 0) {
    dx = bw.linear("lm_head", dlogits, head_in, mw.lm_head, t, vocab, h, -1);
  } else {
    // Tied: logits = xf · E^T. dxf = dlogits · E; dE[V, h] = dlogits^T · xf.
    dx = b.tensor("lm_head.dgrad.out", {t, h}, TensorRole::activation);
    OpAttrs d;
    d.m = t, d.n = h, d.k = vocab;
    b.op(OpKind::gemm, "lm_head.dgrad", {dlogits, mw.embedding}, {dx}, d, -1, Stage::backward);
    bw.wgrad("lm_head", dlogits, head_in, mw.embedding, vocab, h, t, /*trans_a=*/true, -1);
  }
  dx = b.leave_tp("lm_head.dgrad", dx, t, -1, Stage::backward);
  return bw.norm("final_norm", x, mw.final_norm, dx, rows, -1);
}

// Embedding backward on the first virtual stage: scatter-add of `dx` into the table gradient
// (and the position gradient). With tied embeddings the table gradient already holds the
// lm_head part: accumulate.
void embedding_backward(GraphBuilder& b, BackwardBuilder& bw, const ModelWeights& mw, int tokens, int dx, int64_t t,
                        int64_t seq) {
  const RankShape& r = b.rank();
  const Workload& w = b.graph().workload;
  OpAttrs ea;
  ea.rows = t;
  ea.cols = b.model().hidden;
  ea.elements = t * b.model().hidden;
  ea.batch = w.batch;
  ea.seq_q = seq;
  ea.cp = r.cp;  // the rows' positions: the rank's chunks of each sequence
  ea.cp_stride = r.cp_stride;
  ea.accumulate = (b.model().tied_embeddings && r.last_stage()) || w.grad_accum > 1;
  std::vector<int> eout{bw.grad_of(mw.embedding, -1)};
  if (mw.positions >= 0) eout.push_back(bw.grad_of(mw.positions, -1));
  std::vector<int> ein{tokens, b.enter_tp("embedding.bwd", dx, t, -1, Stage::backward)};
  if (ea.accumulate) ein.insert(ein.end(), eout.begin(), eout.end());  // read-modify-write
  b.op(OpKind::embedding_bwd, "embedding.bwd", std::move(ein), std::move(eout), ea, -1, Stage::backward);
}

}  // namespace

Graph build_train(const ModelConfig& m, const Workload& w, const BuildOptions& o) {
  build::check_positions(m, w.seq, "training (seq)");
  GraphBuilder b(m, w, o);
  const RankShape& r = b.rank();
  b.set_pass_multiplier(static_cast<double>(w.grad_accum));
  const ModelWeights mw = b.add_weights();
  // Under context parallelism the rank holds seq/cp tokens of every sequence: every token-wise
  // op (embedding, GEMMs, norms, MLP, loss) runs on those.
  const int64_t seq = r.local_seq(w.seq);
  const int64_t t = w.batch * seq, rows = r.rows(t);
  const int tokens = r.first_stage() ? b.input("tokens", t) : -1;
  const int targets = r.last_stage() ? b.input("targets", t) : -1;

  // Forward: the embedding on the first stage, the previous stage's output on the others.
  AttentionShape s;
  s.batch = w.batch;
  s.seq_q = seq;
  s.seq_kv = seq;  // one K/V block: the whole sequence, or one rank's share of it (ring attention)
  s.kv_capacity = seq;
  // A stage runs its chunks in turn (one, or v of an interleaved stage): forward through
  // chunk 0 .. v − 1, backward through v − 1 .. 0, each chunk receiving its input from the
  // previous virtual stage and sending its output to the next (the gradients the other way).
  const int chunks = r.chunks();
  auto edge = [&](const char* what, int c) { return chunks == 1 ? std::string(what) : fmt::format("chunk{}.{}", c, what); };
  std::vector<LayerActivations> acts(static_cast<std::size_t>(b.layers_built()));
  BackwardBuilder bw(b, s, w.grad_accum > 1);
  int x = -1, dx = -1;
  for (int c = 0; c < chunks; ++c) {
    b.set_chunk(c);
    if (r.model_begins(c)) {
      b.upload(tokens);
      // Vocab-parallel: each rank looks up its rows, the partial embeddings are summed.
      x = b.leave_tp("embedding", b.embed(tokens, mw, w.batch, seq, 0), t, -1, Stage::forward);
    } else {
      x = b.pipeline_recv(edge("pipeline.recv", c), rows, Stage::forward);
    }
    const auto [first, end] = b.chunk_layers(c);
    for (int l = first; l < end; ++l) {
      acts[static_cast<std::size_t>(l)] = b.forward_layer(l, x, mw.layers[static_cast<std::size_t>(l)], s, {});
      x = acts[static_cast<std::size_t>(l)].out;
    }
    if (r.model_ends(c)) {
      dx = head_and_loss(b, bw, mw, x, targets, t, rows);
    } else {
      // The next virtual stage runs the rest; its gradient of this chunk's output comes back.
      b.pipeline_send(edge("pipeline.send", c), x, Stage::forward);
    }
  }
  for (int c = chunks - 1; c >= 0; --c) {
    b.set_chunk(c);
    if (!r.model_ends(c)) dx = b.pipeline_recv(edge("pipeline.recv_grad", c), rows, Stage::backward);
    const auto [first, end] = b.chunk_layers(c);
    for (int l = end - 1; l >= first; --l)
      dx = bw.layer(l, acts[static_cast<std::size_t>(l)], mw.layers[static_cast<std::size_t>(l)], dx);
    if (r.model_begins(c)) embedding_backward(b, bw, mw, tokens, dx, t, seq);
    else b.pipeline_send(edge("pipeline.send_grad", c), dx, Stage::backward);
  }
  b.set_chunk(0);

  if (m.tied_embeddings && r.pp > 1 && (r.first_stage() || r.last_stage())) {
    // The first and last stages each hold the tied table: their gradients are summed before
    // the step (Megatron's embedding-group all-reduce), once per step.
    OpAttrs ar;
    ar.collective = Collective::all_reduce;
    ar.group = 2;
    ar.group_stride = r.pp_stride * (r.pp - 1);
    const int g = bw.grad_of(mw.embedding, -1);
    b.op(OpKind::collective, "embedding.grad.all_reduce", {g}, {g}, ar, -1, Stage::optimizer);
  }
  if (r.sp && r.tensor_parallel()) {
    // Under sequence parallelism each tensor-parallel rank normalizes its own rows, so the
    // norms' weight gradients are partial sums: all-reduced over the tp ranks before the step
    // (Megatron's layernorm-gradient all-reduce), once per step.
    std::vector<int> grads;
    double bytes = 0;
    auto add = [&](const NormWeights& nw, int layer) {
      for (int w : {nw.gamma, nw.beta})
        if (w >= 0) {
          const int gw = bw.grad_of(w, layer);
          grads.push_back(gw);
          bytes += b.graph().tensor(gw).bytes() * b.graph().tensor(gw).count;
        }
    };
    for (int l = 0; l < static_cast<int>(b.layers_built()); ++l) {
      add(mw.layers[static_cast<std::size_t>(l)].attn_norm, l);
      add(mw.layers[static_cast<std::size_t>(l)].mlp_norm, l);
    }
    if (r.last_stage()) add(mw.final_norm, -1);
    OpAttrs ar;
    ar.collective = Collective::all_reduce;
    ar.group = r.tp;
    ar.group_stride = r.tp_stride;
    ar.payload_bytes = bytes;
    b.op(OpKind::collective, "sp.norm_grads.all_reduce", grads, grads, ar, -1, Stage::optimizer);
  }
  add_optimizer(b, bw);
  Graph g = b.take();
  assign_activation_counts(g);
  g.check();
  return g;
}

}  // namespace perfsim
