// Ring attention on the CPU kernels without ranks: every context-parallel rank's blocks (the
// part each computes, backends/ops/context_parallel.hpp), merged by attn_merge, give the whole sequence's
// causal attention at the rank's rows, and the blocks' backward (dQ summed on the rank, dK/dV
// summed on the block's rank) its gradients; the merge alone, and the positions of the rank's
// rows for rope and learned embeddings.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/ops/context_parallel.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim;
using namespace perfsim::cpu;
using namespace perfsim::cpu::test;

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

AttnShape attention(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads, int64_t d, bool causal) {
  AttnShape a;
  a.batch = batch, a.seq_q = a.seq_kv = a.kv_capacity = a.grad_capacity = seq;
  a.heads = heads, a.kv_heads = kv_heads, a.head_dim = d;
  a.causal = causal;
  return a;
}

Op context_op(OpKind kind, int cp, int step) {
  Op op;
  op.kind = kind;
  op.attrs.cp = cp;
  op.attrs.cp_stride = 1;
  op.attrs.ring_step = step;
  return op;
}

// Rows [b, seq, width] of `whole` at the positions of rank r's local rows (chunks r, 2cp−1−r).
std::vector<float> local_rows(const std::vector<float>& whole, int64_t batch, int64_t seq, int64_t width, int cp,
                              int r) {
  const int64_t local = seq / cp, chunk = local / 2;
  std::vector<float> out(static_cast<std::size_t>(batch * local * width));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < local; ++i) {
      const int64_t pos = i < chunk ? r * chunk + i : (2 * cp - 1 - r) * chunk + i - chunk;
      for (int64_t x = 0; x < width; ++x)
        out[static_cast<std::size_t>((b * local + i) * width + x)] =
            whole[static_cast<std::size_t>((b * seq + pos) * width + x)];
    }
  return out;
}

// LSE [b, h, seq] of the whole, at rank r's rows.
std::vector<float> local_lse(const std::vector<float>& whole, int64_t batch, int64_t heads, int64_t seq, int cp,
                             int r) {
  return local_rows(whole, batch * heads, seq, 1, cp, r);
}

}  // namespace

TEST_CASE("ring attention (cpu): merging blocks over two halves of the keys gives the whole") {
  // Keys 0..5 split as 0..2 and 3..5, queries not causal: the merge is exact.
  const AttnShape whole = attention(2, 6, 4, 2, 8, false);
  const std::vector<float> q = random_vec(2 * 6 * 4 * 8, 1), k = random_vec(2 * 6 * 2 * 8, 2),
                           v = random_vec(2 * 6 * 2 * 8, 3);
  std::vector<float> o(q.size()), lse(2 * 4 * 6);
  flash_attention(q.data(), k.data(), v.data(), o.data(), lse.data(), whole);
  AttnShape half = whole;
  half.seq_kv = 3;  // the first three of each sequence's six K/V rows
  std::vector<float> o1(q.size()), l1(lse.size()), o2(q.size()), l2(lse.size()), om(q.size()), lm(lse.size());
  flash_attention(q.data(), k.data(), v.data(), o1.data(), l1.data(), half);
  // The last three rows: K/V shifted by three rows, read as sequences of six.
  flash_attention(q.data(), k.data() + 3 * 2 * 8, v.data() + 3 * 2 * 8, o2.data(), l2.data(), half);
  attn_merge(o1.data(), l1.data(), o2.data(), l2.data(), om.data(), lm.data(), whole);
  CHECK(rel_err(om, o) < 1e-5);
  CHECK(rel_err(lm, lse) < 1e-5);
  // A row neither block saw stays empty; a row one block did not see keeps the other's.
  std::vector<float> empty_o(q.size(), 0.0f), empty_l(lse.size(), neg_inf);
  attn_merge(empty_o.data(), empty_l.data(), empty_o.data(), empty_l.data(), om.data(), lm.data(), whole);
  CHECK(om == empty_o);
  CHECK(lm == empty_l);
  attn_merge(o1.data(), l1.data(), empty_o.data(), empty_l.data(), om.data(), lm.data(), whole);
  CHECK(om == o1);
  CHECK(lm == l1);
}

TEST_CASE("ring attention (cpu): a block's skipped query rows are empty, the others its keys' attention") {
  // q_first = 4 of 8 rows: rows 0..3 get O 0, LSE −inf, dQ 0; rows 4..7 what attention over the
  // whole block gives them.
  AttnShape a = attention(1, 8, 2, 1, 4, false);
  const std::vector<float> q = random_vec(8 * 2 * 4, 11), k = random_vec(8 * 4, 12), v = random_vec(8 * 4, 13),
                           d_o = random_vec(8 * 2 * 4, 14);
  std::vector<float> o(q.size()), lse(16), dq(q.size()), dk(k.size()), dv(v.size());
  flash_attention(q.data(), k.data(), v.data(), o.data(), lse.data(), a);
  flash_attention_bwd(q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), dq.data(), dk.data(),
                      dv.data(), a);
  AttnShape part = a;
  part.q_first = 4;
  std::vector<float> po(q.size(), 7.0f), plse(16, 7.0f), pdq(q.size(), 7.0f), pdk(k.size()), pdv(v.size());
  flash_attention(q.data(), k.data(), v.data(), po.data(), plse.data(), part);
  // The backward of the second half alone: its own O and LSE rows.
  flash_attention_bwd(q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), pdq.data(), pdk.data(),
                      pdv.data(), part);
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t h = 0; h < 2; ++h) {
      CAPTURE(i);
      const auto l = static_cast<std::size_t>(h * 8 + i);
      if (i < 4) CHECK(plse[l] == neg_inf);
      else CHECK(plse[l] == doctest::Approx(lse[l]).epsilon(1e-6));
      for (int64_t x = 0; x < 4; ++x) {
        const auto at = static_cast<std::size_t>((i * 2 + h) * 4 + x);
        if (i < 4) {
          CHECK(po[at] == 0.0f);
          CHECK(pdq[at] == 0.0f);
        } else {
          CHECK(po[at] == doctest::Approx(o[at]).epsilon(1e-5));
          CHECK(pdq[at] == doctest::Approx(dq[at]).epsilon(1e-4));
        }
      }
    }
}

TEST_CASE("ring attention (cpu): every rank's blocks give the whole sequence's causal attention") {
  for (int cp : {2, 3}) {
    CAPTURE(cp);
    const int64_t batch = 2, heads = 4, kv_heads = 2, d = 8, chunk = 3, local = 2 * chunk, seq = cp * local;
    const int64_t qw = heads * d, kw = kv_heads * d;
    const AttnShape whole = attention(batch, seq, heads, kv_heads, d, true);
    const std::vector<float> q = random_vec(static_cast<std::size_t>(batch * seq * qw), 21),
                             k = random_vec(static_cast<std::size_t>(batch * seq * kw), 22),
                             v = random_vec(static_cast<std::size_t>(batch * seq * kw), 23),
                             d_o = random_vec(static_cast<std::size_t>(batch * seq * qw), 24);
    std::vector<float> o(q.size()), lse(static_cast<std::size_t>(batch * heads * seq)), dq(q.size()), dk(k.size()),
        dv(v.size());
    flash_attention(q.data(), k.data(), v.data(), o.data(), lse.data(), whole);
    flash_attention_bwd(q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), dq.data(), dk.data(),
                        dv.data(), whole);

    const AttnShape block = attention(batch, local, heads, kv_heads, d, true);
    std::vector<std::vector<float>> kr, vr;
    for (int r = 0; r < cp; ++r) {
      kr.push_back(local_rows(k, batch, seq, kw, cp, r));
      vr.push_back(local_rows(v, batch, seq, kw, cp, r));
    }
    std::vector<std::vector<float>> dk_sum(static_cast<std::size_t>(cp), std::vector<float>(kr[0].size(), 0.0f)),
        dv_sum = dk_sum;
    for (int r = 0; r < cp; ++r) {
      CAPTURE(r);
      const std::vector<float> qr = local_rows(q, batch, seq, qw, cp, r), dor = local_rows(d_o, batch, seq, qw, cp, r);
      std::vector<float> out, out_lse;
      for (int step = 0; step < cp; ++step) {
        const int owner = ((r - step) % cp + cp) % cp;
        const AttnShape a = ops::on_context_rank(block, context_op(OpKind::flash_attention, cp, step), r);
        std::vector<float> ob(qr.size()), lb(static_cast<std::size_t>(batch * heads * local));
        flash_attention(qr.data(), kr[static_cast<std::size_t>(owner)].data(), vr[static_cast<std::size_t>(owner)].data(),
                        ob.data(), lb.data(), a);
        if (step == 0) {
          out = ob, out_lse = lb;
          continue;
        }
        std::vector<float> merged(ob.size()), merged_lse(lb.size());
        attn_merge(out.data(), out_lse.data(), ob.data(), lb.data(), merged.data(), merged_lse.data(), block);
        out = merged, out_lse = merged_lse;
      }
      CHECK(rel_err(out, local_rows(o, batch, seq, qw, cp, r)) < 1e-5);
      CHECK(rel_err(out_lse, local_lse(lse, batch, heads, seq, cp, r)) < 1e-5);

      std::vector<float> dq_sum(qr.size(), 0.0f);
      for (int step = 0; step < cp; ++step) {
        const auto owner = static_cast<std::size_t>(((r - step) % cp + cp) % cp);
        const AttnShape a = ops::on_context_rank(block, context_op(OpKind::flash_attention_bwd, cp, step), r);
        std::vector<float> gq(qr.size()), gk(kr[0].size()), gv(kr[0].size());
        flash_attention_bwd(qr.data(), kr[owner].data(), vr[owner].data(), out.data(), dor.data(), out_lse.data(),
                            gq.data(), gk.data(), gv.data(), a);
        for (std::size_t i = 0; i < gq.size(); ++i) dq_sum[i] += gq[i];
        for (std::size_t i = 0; i < gk.size(); ++i) dk_sum[owner][i] += gk[i], dv_sum[owner][i] += gv[i];
      }
      CHECK(rel_err(dq_sum, local_rows(dq, batch, seq, qw, cp, r)) < 1e-4);
    }
    for (int r = 0; r < cp; ++r) {
      CAPTURE(r);
      CHECK(rel_err(dk_sum[static_cast<std::size_t>(r)], local_rows(dk, batch, seq, kw, cp, r)) < 1e-4);
      CHECK(rel_err(dv_sum[static_cast<std::size_t>(r)], local_rows(dv, batch, seq, kw, cp, r)) < 1e-4);
    }
  }
}

TEST_CASE("ring attention (cpu): rope and learned positions of a rank's rows are its chunks'") {
  // cp = 2, sequences of 16: rank 0 holds positions 0..3 and 12..15, rank 1 4..7 and 8..11.
  Op op = context_op(OpKind::rope, 2, 0);
  op.attrs.cp_stride = 2;  // ranks 0, 1 are tensor-parallel: context places 0 at ranks 0-1, 1 at 2-3
  RopeShape r;
  r.tokens = 16, r.seq = 8;
  const RopeShape r0 = ops::on_context_rank(r, op, 1), r1 = ops::on_context_rank(r, op, 2);
  const std::vector<int64_t> want0{0, 1, 2, 3, 12, 13, 14, 15}, want1{4, 5, 6, 7, 8, 9, 10, 11};
  for (int64_t t = 0; t < 16; ++t) {
    CAPTURE(t);
    CHECK(r0.position_of(t) == want0[static_cast<std::size_t>(t % 8)]);
    CHECK(r1.position_of(t) == want1[static_cast<std::size_t>(t % 8)]);
  }
  EmbeddingShape e;
  e.tokens = 8, e.seq = 8, e.position = 100;  // an offset applies to both chunks
  CHECK(ops::on_context_rank(e, op, 3).position_of(5) == 109);
  op.attrs.cp = 1;  // without context parallelism the rows are the sequence's
  CHECK(ops::on_context_rank(e, op, 3).position_of(5) == 105);
}
