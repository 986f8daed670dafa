// Ring attention for context parallelism (Liu et al. 2023, "Ring Attention with Blockwise
// Transformers"; Megatron-LM / Transformer Engine context parallelism): each of the cp ranks
// holds seq/cp tokens of every sequence (chunks i and 2·cp − 1 − i of 2·cp, rank.hpp), and its
// queries meet every rank's keys and values as the K/V blocks pass around the ring, one
// send_recv per step on the context stream, overlapped with the attention block of the
// previous step. At step k a rank holds the block of the rank k places before it.
//
// Each block is a flash attention writing its output and log-sum-exp, merged into the running
// ones by the online-softmax correction (attn_merge), as Transformer Engine runs it: context
// parallelism has no materialized-attention form. The rank's own block is causal; under the
// load-balanced chunks every other block meets the queries in half of its rectangle (all of
// them against the block's first chunk, or the second chunk's against all of it: which, the
// executing rank decides, ring_block_rows), as many pairs as the causal block keeps, so every
// block is priced as the causal one: the rank's attention is 1/cp of the single GPU's. A
// block's rows outside its half are written empty (output 0, log-sum-exp −inf), which the merge
// leaves as they were.
//
// Backward passes the K/V blocks around again; each block's flash backward reads the merged
// output and log-sum-exp, its dQ is summed locally and its dK/dV travel on around the ring with
// the block, each rank adding its own, back to the block's rank.
#include <fmt/format.h>

#include <tuple>
#include <utility>
#include <vector>

#include "core/builders/common.hpp"
#include "core/builders/streams.hpp"

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

namespace {

// The attributes of ring step `step`'s flash attention (forward or backward).
OpAttrs ring_attrs(OpAttrs a, const RankShape& r, int step) {
  a.causal = step == 0;
  a.cp = r.cp;
  a.cp_stride = r.cp_stride;
  a.ring_step = step;
  return a;
}

}  // namespace

std::pair<int, int> GraphBuilder::ring_block(int l, int step, int q, int k, int v, const AttentionShape& s) {
  const std::string name = lname(l, fmt::format("attn.ring{}.flash_attention", step));
  const int o = tensor(name + ".out", {s.batch * s.seq_q, m_rank.q_dim}, TensorRole::activation);
  const int lse = tensor(name + ".lse", {s.batch, m_rank.heads, s.seq_q}, TensorRole::activation, -1, DType::fp32);
  op(OpKind::flash_attention, name, {q, k, v}, {o, lse}, ring_attrs(attention_attrs(s), m_rank, step), l,
     Stage::forward);
  return {o, lse};
}

void GraphBuilder::ring_attention(int l, LayerActivations& a, const AttentionShape& s) {
  const int cp = m_rank.cp;
  auto n = [&](int j, const char* what) { return lname(l, fmt::format("attn.ring{}.{}", j, what)); };
  a.ring.assign(static_cast<std::size_t>(cp), {});
  a.ring[0].k = a.k_src;
  a.ring[0].v = a.v_src;
  int out = -1, lse = -1;
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
    const auto [o, block_lse] = ring_block(l, j, a.q_att, a.ring[J].k, a.ring[J].v, s);
    if (j == 0) {
      out = o, lse = block_lse;
      continue;
    }
    const int merged = activation_like(n(j, "merge.out"), o);
    const int merged_lse = activation_like(n(j, "merge.lse"), block_lse);
    op(OpKind::attn_merge, n(j, "merge"), {out, lse, o, block_lse}, {merged, merged_lse}, attention_attrs(s), l,
       Stage::forward);
    out = merged, lse = merged_lse;
  }
  a.context = out;
  a.ring_lse = lse;
}

GraphBuilder::RingGrads GraphBuilder::ring_attention_bwd(int l, const LayerActivations& a,
                                                         int dcontext, const AttentionShape& s) {
  const int cp = m_rank.cp;
  auto n = [&](int j, const char* what) { return lname(l, fmt::format("attn.ring{}.{}", j, what)); };
  const OpAttrs aa = attention_attrs(s);
  // The forward's received blocks were freed after use: the K/V go around the ring again.
  std::vector<int> k(static_cast<std::size_t>(cp), -1), v(static_cast<std::size_t>(cp), -1);
  k[0] = a.ring.at(0).k;
  v[0] = a.ring.at(0).v;
  RingGrads g;
  int dk_travel = -1, dv_travel = -1;  // the dK/dV of the block last sent on, as received
  for (int j = 0; j < cp; ++j) {
    const auto J = static_cast<std::size_t>(j);
    if (j + 1 < cp) {
      const auto [kn, vn] = ring_step(n(j + 1, "kv.bwd"), k[J], v[J], n(j + 1, "k.bwd"),
                                      n(j + 1, "v.bwd"), l, Stage::backward);
      k[J + 1] = kn;
      v[J + 1] = vn;
    }
    const int dq = activation_like(n(j, "flash_attention.bwd.dq"), a.q_att);
    const int dk = activation_like(n(j, "flash_attention.bwd.dk"), a.k_att);
    const int dv = activation_like(n(j, "flash_attention.bwd.dv"), a.v);
    op(OpKind::flash_attention_bwd, n(j, "flash_attention.bwd"), {a.q_att, k[J], v[J], a.context, dcontext, a.ring_lse},
       {dq, dk, dv}, ring_attrs(aa, m_rank, j), l, Stage::backward);
    g.dq = j == 0 ? dq : add_blocks(n(j, "dq_sum"), g.dq, dq, l, Stage::backward);
    if (j == 0) {
      g.dk = dk, g.dv = dv;
      continue;
    }
    // The block's gradient so far (the ranks it met before this one) plus this rank's, on to
    // the next rank, overlapped with the next block.
    int dk_out = dk, dv_out = dv;
    if (j >= 2) {
      dk_out = add_blocks(n(j, "dk_acc"), dk_travel, dk, l, Stage::backward);
      dv_out = add_blocks(n(j, "dv_acc"), dv_travel, dv, l, Stage::backward);
    }
    std::tie(dk_travel, dv_travel) =
        ring_step(n(j, "dkv"), dk_out, dv_out, n(j, "dk.recv"), n(j, "dv.recv"), l, Stage::backward);
  }
  // After the last step the rank holds its own block's gradient from every other rank.
  if (cp > 1) {
    g.dk = add_blocks(lname(l, "attn.ring.dk_sum"), g.dk, dk_travel, l, Stage::backward);
    g.dv = add_blocks(lname(l, "attn.ring.dv_sum"), g.dv, dv_travel, l, Stage::backward);
  }
  return g;
}

}  // namespace perfsim::build
