// Ring attention for context parallelism (Liu et al. 2023, "Ring Attention with Blockwise
// Transformers"; Megatron-LM / Transformer Engine context parallelism): each of the cp ranks
// holds seq/cp tokens of every sequence (chunks i and 2·cp − 1 − i of 2·cp, rank.hpp), and its
// queries meet every rank's keys and values as the K/V blocks pass around the ring, one
// send_recv per step on the context stream, overlapped with the attention block of the
// previous step. Backward passes the K/V blocks around again and sends the partial dK/dV of
// the other ranks' blocks back to them.
//
// Each block is the local queries [B, seq/cp] against one rank's K/V [B, seq/cp]: cp blocks of
// (seq/cp)² scores, so the rank's attention is exactly 1/cp of the single GPU's score rectangle
// (op_metrics counts the whole rectangle, causal or not). Under the load-balanced chunks every
// block is half masked: the rank's own block by the causal triangle, the others by whole chunks
// (Transformer Engine runs those as unmasked half-size blocks); each is priced and run as a
// causal block of the same useful work. The blocks' outputs are folded into one by the
// online-softmax correction, modelled as an element-wise add per step.
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "core/build/common.hpp"
#include "core/build/streams.hpp"

namespace perfsim::build {

std::pair<int, int> GraphBuilder::ring_step(const std::string& name, int x, int y,
                                            const std::string& xname, const std::string& yname,
                                            int layer, Stage stage) {
  const int rx = activation_like(xname, x);
  const int ry = activation_like(yname, y);
  OpAttrs a;
  a.collective = Collective::send_recv;
  a.group = m_rank.cp;  // the ring: send to the next rank, receive from the previous one
  a.group_stride = m_rank.cp_stride;
  // Both blocks travel as one buffer (Transformer Engine packs K and V): the payload is their
  // sum, restated by the precision passes when they change the blocks' dtype.
  a.payload_bytes = m_graph.tensor(x).bytes() + m_graph.tensor(y).bytes();
  const int id = op(OpKind::collective, name + ".send_recv", {x, y}, {rx, ry}, a, layer, stage);
  m_graph.ops[static_cast<std::size_t>(id)].stream = context_stream;
  return {rx, ry};
}

int GraphBuilder::add_blocks(const std::string& name, int a, int b, int layer, Stage stage) {
  const int y = activation_like(name + ".out", a);
  OpAttrs at;
  at.elements = m_graph.tensor(a).elements();
  op(OpKind::residual_add, name, {a, b}, {y}, at, layer, stage);
  return y;
}

void GraphBuilder::ring_attention(int l, LayerActivations& a, const AttentionShape& s) {
  const int cp = m_rank.cp;
  auto n = [&](int j, const char* what) { return lname(l, fmt::format("attn.ring{}.{}", j, what)); };
  const OpAttrs aa = attention_attrs(s);
  const OpAttrs sa = softmax_attrs(s);
  const std::vector<int64_t> score_shape{s.batch, m_rank.heads, s.seq_q, s.seq_kv};
  const int64_t t = s.batch * s.seq_q;
  a.ring.assign(static_cast<std::size_t>(cp), {});
  a.ring[0].k = a.k_src;
  a.ring[0].v = a.v_src;
  int context = -1;
  for (int j = 0; j < cp; ++j) {
    const auto J = static_cast<std::size_t>(j);
    // Step j + 1's transfer is issued before block j, so it starts once block j − 1 is done and
    // runs under block j (double buffering, as Transformer Engine's loop does).
    if (j + 1 < cp) {
      const auto [k, v] = ring_step(n(j + 1, "kv"), a.ring[J].k, a.ring[J].v, n(j + 1, "k"),
                                    n(j + 1, "v"), l, Stage::forward);
      a.ring[J + 1].k = k;
      a.ring[J + 1].v = v;
    }
    LayerActivations::RingBlock& b = a.ring[J];
    b.scores = tensor(n(j, "scores.out"), score_shape, TensorRole::activation);
    op(OpKind::attn_scores, n(j, "scores"), {a.q_att, b.k}, {b.scores}, aa, l, Stage::forward);
    b.probs = tensor(n(j, "softmax.out"), score_shape, TensorRole::activation);
    op(OpKind::attn_softmax, n(j, "softmax"), {b.scores}, {b.probs}, sa, l, Stage::forward);
    const int out = tensor(n(j, "context.out"), {t, m_rank.q_dim}, TensorRole::activation);
    op(OpKind::attn_context, n(j, "context"), {b.probs, b.v}, {out}, aa, l, Stage::forward);
    context = j == 0 ? out : add_blocks(n(j, "merge"), context, out, l, Stage::forward);
  }
  a.context = context;
}

GraphBuilder::RingGrads GraphBuilder::ring_attention_bwd(int l, const LayerActivations& a,
                                                         int dcontext, const AttentionShape& s) {
  const int cp = m_rank.cp;
  auto n = [&](int j, const char* what) { return lname(l, fmt::format("attn.ring{}.{}", j, what)); };
  const OpAttrs aa = attention_attrs(s);
  const OpAttrs sa = softmax_attrs(s);
  // The forward's received blocks were freed after use: the K/V go around the ring again.
  std::vector<int> k(static_cast<std::size_t>(cp), -1), v(static_cast<std::size_t>(cp), -1);
  k[0] = a.ring.at(0).k;
  v[0] = a.ring.at(0).v;
  RingGrads g;
  std::vector<int> dk_recv(static_cast<std::size_t>(cp), -1), dv_recv(static_cast<std::size_t>(cp), -1);
  for (int j = 0; j < cp; ++j) {
    const auto J = static_cast<std::size_t>(j);
    if (j + 1 < cp) {
      const auto [kn, vn] = ring_step(n(j + 1, "kv.bwd"), k[J], v[J], n(j + 1, "k.bwd"),
                                      n(j + 1, "v.bwd"), l, Stage::backward);
      k[J + 1] = kn;
      v[J + 1] = vn;
    }
    const LayerActivations::RingBlock& b = a.ring.at(J);
    const int dprobs = activation_like(n(j, "context.bwd.dprobs"), b.probs);
    const int dv = activation_like(n(j, "context.bwd.dv"), a.v);
    op(OpKind::attn_context_bwd, n(j, "context.bwd"), {dcontext, b.probs, v[J]}, {dprobs, dv}, aa,
       l, Stage::backward);
    const int dscores = activation_like(n(j, "softmax.bwd.out"), b.scores);
    op(OpKind::attn_softmax_bwd, n(j, "softmax.bwd"), {b.probs, dprobs}, {dscores}, sa, l,
       Stage::backward);
    const int dq = activation_like(n(j, "scores.bwd.dq"), a.q_att);
    const int dk = activation_like(n(j, "scores.bwd.dk"), a.k_att);
    op(OpKind::attn_scores_bwd, n(j, "scores.bwd"), {dscores, a.q_att, k[J]}, {dq, dk}, aa, l,
       Stage::backward);
    g.dq = j == 0 ? dq : add_blocks(n(j, "dq_sum"), g.dq, dq, l, Stage::backward);
    if (j == 0) {
      g.dk = dk;
      g.dv = dv;
      continue;
    }
    // The partial gradients of rank (i − j)'s block go back to it around the ring, overlapped
    // with the next block; the rank adds each received partial of its own block one step later.
    const auto [rk, rv] = ring_step(n(j, "dkv"), dk, dv, n(j, "dk.recv"), n(j, "dv.recv"), l,
                                    Stage::backward);
    dk_recv[J] = rk;
    dv_recv[J] = rv;
    if (j >= 2) {
      g.dk = add_blocks(n(j - 1, "dk_sum"), g.dk, dk_recv[J - 1], l, Stage::backward);
      g.dv = add_blocks(n(j - 1, "dv_sum"), g.dv, dv_recv[J - 1], l, Stage::backward);
    }
  }
  const auto last = static_cast<std::size_t>(cp - 1);
  g.dk = add_blocks(n(cp - 1, "dk_sum"), g.dk, dk_recv[last], l, Stage::backward);
  g.dv = add_blocks(n(cp - 1, "dv_sum"), g.dv, dv_recv[last], l, Stage::backward);
  return g;
}

}  // namespace perfsim::build
