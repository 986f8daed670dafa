// CPU attention kernels against a naive reference (double loops written from the
// definitions), and flash attention against the materialized chain, forward and backward:
// GQA (8 query heads on 2 kv heads), causal and not, and decode (seq_q 1) reading a cache
// longer than the valid rows; paged attention and appends through a shuffled block table; ALiBi
// against Press et al.'s slopes written out as their reference code builds them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "approx.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "core/graph/alibi.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim::cpu;
using perfsim::test::approx;
using namespace perfsim::cpu::test;

namespace {

struct Ref {
  std::vector<double> s, p, o, lse;        // forward
  std::vector<double> dp, ds, dq, dk, dv;  // backward (dk, dv with grad_capacity rows)
};

std::size_t qi(const AttnShape& a, int64_t b, int64_t i, int64_t h, int64_t x) {
  return static_cast<std::size_t>(((b * a.seq_q + i) * a.heads + h) * a.head_dim + x);
}
std::size_t ki(const AttnShape& a, int64_t cap, int64_t b, int64_t j, int64_t kh, int64_t x) {
  return static_cast<std::size_t>(((b * cap + j) * a.kv_heads + kh) * a.head_dim + x);
}
std::size_t si(const AttnShape& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  return static_cast<std::size_t>(((b * a.heads + h) * a.seq_q + i) * a.seq_kv + j);
}

// ALiBi slopes as Press et al.'s reference code (get_slopes) builds them: for n a power of two,
// start = 2^(−2^−(log2 n − 3)) and slope i = start^(i+1); otherwise the closest power of two's
// slopes, then every other slope of twice that, from the first.
std::vector<double> press_slopes(int64_t n) {
  const auto power_of_2 = [](int64_t m) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3)));
    std::vector<double> out;
    for (int64_t i = 0; i < m; ++i) out.push_back(start * std::pow(start, static_cast<double>(i)));
    return out;
  };
  const double l = std::log2(static_cast<double>(n));
  if (l == std::floor(l)) return power_of_2(n);
  const auto closest = static_cast<int64_t>(std::pow(2.0, std::floor(l)));
  std::vector<double> out = power_of_2(closest);
  const std::vector<double> twice = press_slopes(2 * closest);
  for (std::size_t i = 0; i < twice.size() && static_cast<int64_t>(out.size()) < n; i += 2) out.push_back(twice[i]);
  return out;
}

// Straight from the definitions: S = QK^T/sqrt(d), causal mask by absolute position,
// P = softmax (of S − m_h·|i − j| with ALiBi), O = PV; backward by the chain rule with dK/dV
// summed over each GQA group.
Ref reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
              const std::vector<float>& d_o, const AttnShape& a) {
  Ref r;
  const std::size_t ns = static_cast<std::size_t>(a.batch * a.heads * a.seq_q * a.seq_kv);
  r.s.assign(ns, 0), r.p.assign(ns, 0), r.dp.assign(ns, 0), r.ds.assign(ns, 0);
  r.o.assign(q.size(), 0), r.dq.assign(q.size(), 0);
  r.lse.assign(static_cast<std::size_t>(a.batch * a.heads * a.seq_q), 0);
  const std::size_t ng = static_cast<std::size_t>(a.batch * a.grad_capacity * a.kv_heads * a.head_dim);
  r.dk.assign(ng, 0), r.dv.assign(ng, 0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  const int64_t group = a.heads / a.kv_heads;
  const std::vector<double> slopes = a.alibi_heads > 0 ? press_slopes(a.alibi_heads) : std::vector<double>{};
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < a.seq_q; ++i) {
        const int64_t pos = a.seq_kv - a.seq_q + i;  // absolute position of query i
        // The softmax's input: S plus the bias, −m_h·(pos − j) (its mirror for keys after pos).
        std::vector<double> logit(static_cast<std::size_t>(a.seq_kv));
        double mx = -INFINITY;
        for (int64_t j = 0; j < a.seq_kv; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < a.head_dim; ++x)
            dot += double(q[qi(a, b, i, h, x)]) * k[ki(a, a.kv_capacity, b, j, kh, x)];
          r.s[si(a, b, h, i, j)] = dot * scale;
          logit[static_cast<std::size_t>(j)] =
              dot * scale - (slopes.empty() ? 0.0 : slopes[static_cast<std::size_t>(h)] * std::abs(double(pos - j)));
          if (!a.causal || j <= pos) mx = std::max(mx, logit[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < a.seq_kv; ++j)
          if (!a.causal || j <= pos) sum += std::exp(logit[static_cast<std::size_t>(j)] - mx);
        r.lse[static_cast<std::size_t>((b * a.heads + h) * a.seq_q + i)] = mx + std::log(sum);
        for (int64_t j = 0; j < a.seq_kv; ++j)
          r.p[si(a, b, h, i, j)] = (!a.causal || j <= pos) ? std::exp(logit[static_cast<std::size_t>(j)] - mx) / sum : 0.0;
        for (int64_t x = 0; x < a.head_dim; ++x) {
          double acc = 0;
          for (int64_t j = 0; j < a.seq_kv; ++j) acc += r.p[si(a, b, h, i, j)] * v[ki(a, a.kv_capacity, b, j, kh, x)];
          r.o[qi(a, b, i, h, x)] = acc;
        }
        // Backward of this row.
        double rowdot = 0;
        for (int64_t j = 0; j < a.seq_kv; ++j) {
          double dp = 0;
          for (int64_t x = 0; x < a.head_dim; ++x)
            dp += double(d_o[qi(a, b, i, h, x)]) * v[ki(a, a.kv_capacity, b, j, kh, x)];
          r.dp[si(a, b, h, i, j)] = dp;
          rowdot += dp * r.p[si(a, b, h, i, j)];
        }
        for (int64_t j = 0; j < a.seq_kv; ++j) {
          const double ds = r.p[si(a, b, h, i, j)] * (r.dp[si(a, b, h, i, j)] - rowdot);
          r.ds[si(a, b, h, i, j)] = ds;
          for (int64_t x = 0; x < a.head_dim; ++x) {
            r.dq[qi(a, b, i, h, x)] += scale * ds * k[ki(a, a.kv_capacity, b, j, kh, x)];
            r.dk[ki(a, a.grad_capacity, b, j, kh, x)] += scale * ds * q[qi(a, b, i, h, x)];
            r.dv[ki(a, a.grad_capacity, b, j, kh, x)] += r.p[si(a, b, h, i, j)] * d_o[qi(a, b, i, h, x)];
          }
        }
      }
    }
  return r;
}

AttnShape shape(int64_t batch, int64_t sq, int64_t skv, int64_t heads, int64_t kvh, int64_t d,
                int64_t cap, bool causal, int64_t grad_cap = 0) {
  AttnShape a;
  a.batch = batch, a.seq_q = sq, a.seq_kv = skv, a.heads = heads, a.kv_heads = kvh, a.head_dim = d;
  a.kv_capacity = cap;
  a.grad_capacity = grad_cap > 0 ? grad_cap : skv;
  a.causal = causal;
  return a;
}

struct Inputs {
  std::vector<float> q, k, v, d_o;
};

template <class T>
Inputs make_inputs(const AttnShape& a, uint64_t seed) {
  Inputs in;
  in.q = rounded<T>(random_vec(static_cast<std::size_t>(a.batch * a.seq_q * a.heads * a.head_dim), seed));
  in.k = rounded<T>(random_vec(static_cast<std::size_t>(a.batch * a.kv_capacity * a.kv_heads * a.head_dim), seed + 1));
  in.v = rounded<T>(random_vec(static_cast<std::size_t>(a.batch * a.kv_capacity * a.kv_heads * a.head_dim), seed + 2));
  in.d_o = rounded<T>(random_vec(in.q.size(), seed + 3));
  return in;
}

const AttnShape cases[] = {
    shape(2, 5, 7, 8, 2, 16, 7, true),     // GQA, causal, prefill-like with a kv prefix
    shape(2, 9, 9, 8, 2, 12, 9, false),    // GQA, non-causal
    shape(1, 1, 13, 4, 4, 8, 20, true),    // decode: one query over a longer cache
    shape(1, 3, 11, 6, 3, 5, 16, true, 16),  // odd head_dim; gradients into capacity rows
};

// Materialized chain with storage T; returns the outputs widened to float.
template <class T>
void check_materialized(const AttnShape& a, uint64_t seed) {
  const Inputs in = make_inputs<T>(a, seed);
  const Ref r = reference(in.q, in.k, in.v, in.d_o, a);
  const auto q = to_storage<T>(in.q), k = to_storage<T>(in.k), v = to_storage<T>(in.v), d_o = to_storage<T>(in.d_o);
  const std::size_t ns = r.s.size();
  std::vector<T> s(ns), p(ns), o(q.size()), dp(ns), ds(ns), dq(q.size()), dk(r.dk.size()), dv(r.dv.size());
  attn_scores(q.data(), k.data(), s.data(), a);
  attn_softmax(s.data(), p.data(), a);
  attn_context(p.data(), v.data(), o.data(), a);
  attn_context_bwd(d_o.data(), p.data(), v.data(), dp.data(), dv.data(), a);
  attn_softmax_bwd(p.data(), dp.data(), ds.data(), a);
  attn_scores_bwd(ds.data(), q.data(), k.data(), dq.data(), dk.data(), a);
  const double tol = tolerance<T>();
  CHECK(rel_err(to_floats(s), r.s) < tol);
  CHECK(rel_err(to_floats(p), r.p) < tol);
  CHECK(rel_err(to_floats(o), r.o) < tol);
  CHECK(rel_err(to_floats(dp), r.dp) < tol);
  CHECK(rel_err(to_floats(dv), r.dv) < tol);
  CHECK(rel_err(to_floats(ds), r.ds) < tol);
  CHECK(rel_err(to_floats(dq), r.dq) < tol);
  CHECK(rel_err(to_floats(dk), r.dk) < tol);
}

template <class T>
void check_flash(const AttnShape& a, uint64_t seed, int64_t tile) {
  const Inputs in = make_inputs<T>(a, seed);
  const Ref r = reference(in.q, in.k, in.v, in.d_o, a);
  const auto q = to_storage<T>(in.q), k = to_storage<T>(in.k), v = to_storage<T>(in.v), d_o = to_storage<T>(in.d_o);
  std::vector<T> o(q.size()), dq(q.size()), dk(r.dk.size()), dv(r.dv.size());
  std::vector<float> lse(r.lse.size());
  flash_attention(q.data(), k.data(), v.data(), o.data(), lse.data(), a, tile);
  flash_attention_bwd(q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), dq.data(),
                      dk.data(), dv.data(), a, tile);
  const double tol = tolerance<T>();
  CHECK(rel_err(to_floats(o), r.o) < tol);
  CHECK(rel_err(lse, r.lse) < 1e-5);  // LSE is always fp32
  CHECK(rel_err(to_floats(dq), r.dq) < tol);
  CHECK(rel_err(to_floats(dk), r.dk) < tol);
  CHECK(rel_err(to_floats(dv), r.dv) < tol);
}

}  // namespace

TEST_CASE("cpu attention: materialized chain matches the reference (fp32)") {
  uint64_t seed = 100;
  for (const AttnShape& a : cases) {
    CAPTURE(a.seq_q);
    CAPTURE(a.seq_kv);
    check_materialized<float>(a, seed++);
  }
}

TEST_CASE("cpu attention: materialized chain matches the reference (bf16, fp16)") {
  uint64_t seed = 200;
  for (const AttnShape& a : cases) {
    CAPTURE(a.seq_q);
    check_materialized<bf16>(a, seed++);
    check_materialized<half>(a, seed++);
  }
}

TEST_CASE("ALiBi slopes: Press et al.'s numbers and their reference construction") {
  // §3: 8 heads take 1/2, 1/4, ..., 1/256; 16 heads interpolate, 1/√2, 1/2, ..., 1/256.
  CHECK(perfsim::alibi_slope(0, 8) == 0.5);
  CHECK(perfsim::alibi_slope(7, 8) == 1.0 / 256);
  CHECK(perfsim::alibi_slope(0, 16) == approx(1 / std::sqrt(2.0)));
  CHECK(perfsim::alibi_slope(15, 16) == 1.0 / 256);
  // 12 heads: the 8 slopes of 8, then 2^−0.5, 2^−1.5, 2^−2.5, 2^−3.5 (every other of 16's).
  CHECK(perfsim::alibi_slope(8, 12) == approx(std::pow(2.0, -0.5)));
  CHECK(perfsim::alibi_slope(11, 12) == approx(std::pow(2.0, -3.5)));
  for (int64_t n = 1; n <= 96; ++n) {
    CAPTURE(n);
    const std::vector<double> want = press_slopes(n);
    REQUIRE(static_cast<int64_t>(want.size()) == n);
    for (int64_t h = 0; h < n; ++h) CHECK(perfsim::alibi_slope(h, n) == approx(want[static_cast<std::size_t>(h)]));
  }
  // The bias of query position 5 against key 2 on the first of 8 heads: −0.5·3.
  CHECK(perfsim::alibi_bias(0.5, 5, 2) == -1.5);
}

TEST_CASE("cpu attention with ALiBi: materialized chain and flash attention match a naive attention") {
  // The materialized scores stay Q·K^T·scale (the bias enters the softmax); the probabilities,
  // outputs and every gradient carry it, as flash attention's do, forward and backward.
  uint64_t seed = 900;
  for (AttnShape a : cases) {
    a.alibi_heads = a.heads;
    CAPTURE(a.seq_q);
    CAPTURE(a.seq_kv);
    CAPTURE(a.heads);
    check_materialized<float>(a, seed++);
    check_materialized<bf16>(a, seed++);
    for (int64_t tile : {2, 64}) check_flash<float>(a, seed++, tile);
    check_flash<half>(a, seed++, 4);
  }
  AttnShape longer = shape(1, 70, 70, 8, 2, 8, 70, true);
  longer.alibi_heads = 8;
  check_flash<float>(longer, seed++, 64);
}

TEST_CASE("cpu attention: causal softmax zeroes future positions and rows sum to one") {
  const AttnShape a = shape(1, 3, 5, 1, 1, 4, 5, true);
  const auto q = random_vec(12, 7), k = random_vec(20, 8);
  std::vector<float> s(15), p(15);
  attn_scores(q.data(), k.data(), s.data(), a);
  attn_softmax(s.data(), p.data(), a);
  // Query i sits at position 5 - 3 + i = 2 + i and sees kv 0..2+i.
  for (int i = 0; i < 3; ++i) {
    double sum = 0;
    for (int j = 0; j < 5; ++j) {
      if (j > 2 + i) CHECK(p[static_cast<std::size_t>(i * 5 + j)] == 0.0f);
      sum += p[static_cast<std::size_t>(i * 5 + j)];
    }
    CHECK(sum == approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("cpu flash attention: forward and backward equal the reference across tiles (fp32)") {
  uint64_t seed = 300;
  for (const AttnShape& a : cases)
    for (int64_t tile : {2, 4, 64}) {
      CAPTURE(a.seq_kv);
      CAPTURE(tile);
      check_flash<float>(a, seed++, tile);
    }
  // Longer sequences than one default tile, with ragged last tiles.
  check_flash<float>(shape(1, 70, 70, 4, 2, 8, 70, true), seed++, 64);
  check_flash<float>(shape(1, 1, 133, 8, 2, 16, 160, true), seed++, 64);
}

TEST_CASE("cpu flash attention: bf16 and fp16 storages") {
  uint64_t seed = 400;
  for (const AttnShape& a : cases) {
    check_flash<bf16>(a, seed++, 4);
    check_flash<half>(a, seed++, 4);
  }
}

TEST_CASE("cpu flash attention: equals the materialized chain it replaces") {
  const AttnShape a = shape(2, 6, 10, 8, 2, 8, 10, true);
  const Inputs in = make_inputs<float>(a, 500);
  const std::size_t ns = static_cast<std::size_t>(a.batch * a.heads * a.seq_q * a.seq_kv);
  std::vector<float> s(ns), p(ns), o(in.q.size()), dp(ns), ds(ns), dq(in.q.size()), dk(in.k.size()), dv(in.k.size());
  attn_scores(in.q.data(), in.k.data(), s.data(), a);
  attn_softmax(s.data(), p.data(), a);
  attn_context(p.data(), in.v.data(), o.data(), a);
  attn_context_bwd(in.d_o.data(), p.data(), in.v.data(), dp.data(), dv.data(), a);
  attn_softmax_bwd(p.data(), dp.data(), ds.data(), a);
  attn_scores_bwd(ds.data(), in.q.data(), in.k.data(), dq.data(), dk.data(), a);

  std::vector<float> fo(in.q.size()), lse(static_cast<std::size_t>(a.batch * a.heads * a.seq_q));
  std::vector<float> fdq(in.q.size()), fdk(in.k.size()), fdv(in.k.size());
  flash_attention(in.q.data(), in.k.data(), in.v.data(), fo.data(), lse.data(), a, 4);
  flash_attention_bwd(in.q.data(), in.k.data(), in.v.data(), fo.data(), in.d_o.data(), lse.data(),
                      fdq.data(), fdk.data(), fdv.data(), a, 4);
  CHECK(rel_err(fo, o) < 1e-5);
  CHECK(rel_err(fdq, dq) < 1e-5);
  CHECK(rel_err(fdk, dk) < 1e-5);
  CHECK(rel_err(fdv, dv) < 1e-5);
}

namespace {

// A shuffled block table naming every page of the pool once, as a pool looks after sequences
// of other lengths came and went.
std::vector<int32_t> shuffled_table(int64_t pages, uint64_t seed) {
  std::vector<int32_t> t(static_cast<std::size_t>(pages));
  for (int64_t i = 0; i < pages; ++i) t[static_cast<std::size_t>(i)] = static_cast<int32_t>(i);
  std::mt19937_64 rng(seed);
  std::shuffle(t.begin(), t.end(), rng);
  return t;
}

// Copies a contiguous [b, cap, kvh, d] cache into pages through the table (the first seq_kv rows).
template <class T>
std::vector<T> to_pages(const std::vector<T>& flat, const AttnShape& a, const std::vector<int32_t>& table,
                        const PagedLayout& p) {
  const int64_t row = a.kv_heads * a.head_dim;
  std::vector<T> pages(static_cast<std::size_t>(p.num_blocks * p.block * row), from_f32<T>(99.0f));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t j = 0; j < a.seq_kv; ++j) {
      const int64_t r = paged_row(table.data(), p, b, j);
      std::copy_n(flat.begin() + (b * a.kv_capacity + j) * row, row, pages.begin() + r * row);
    }
  return pages;
}

template <class T>
void check_paged_flash(const AttnShape& a, int64_t block, uint64_t seed) {
  const Inputs in = make_inputs<T>(a, seed);
  const Ref r = reference(in.q, in.k, in.v, in.d_o, a);
  PagedLayout p;
  p.block = block;
  p.max_blocks = (a.seq_kv + block - 1) / block;
  p.num_blocks = a.batch * p.max_blocks;
  const auto table = shuffled_table(p.num_blocks, seed);
  const auto q = to_storage<T>(in.q), k = to_storage<T>(in.k), v = to_storage<T>(in.v);
  const auto kp = to_pages(k, a, table, p), vp = to_pages(v, a, table, p);
  std::vector<T> o(q.size()), o_flat(q.size());
  std::vector<float> lse(r.lse.size()), lse_flat(r.lse.size());
  paged_flash_attention(q.data(), kp.data(), vp.data(), table.data(), p, o.data(), lse.data(), a);
  flash_attention(q.data(), k.data(), v.data(), o_flat.data(), lse_flat.data(), a);
  CHECK(rel_err(to_floats(o), r.o) < tolerance<T>());
  CHECK(rel_err(lse, r.lse) < 1e-5);
  // The same arithmetic in the same order as the contiguous kernel: identical results.
  CHECK(to_floats(o) == to_floats(o_flat));
  CHECK(lse == lse_flat);
}

}  // namespace

TEST_CASE("cpu paged attention: reads K/V through a shuffled block table") {
  uint64_t seed = 600;
  for (const AttnShape& a : cases)
    for (int64_t block : {1, 3, 4, 64}) {
      CAPTURE(a.seq_kv);
      CAPTURE(block);
      check_paged_flash<float>(a, block, seed++);
    }
  // Decode over many pages (GQA group of 4, batch 3), and a ragged last page.
  check_paged_flash<float>(shape(3, 1, 133, 8, 2, 16, 160, true), 16, seed++);
  check_paged_flash<bf16>(shape(3, 1, 133, 8, 2, 16, 160, true), 16, seed++);
  check_paged_flash<half>(shape(2, 4, 50, 4, 4, 8, 64, true), 8, seed++);
  // ALiBi decode: the query at position 132 against every page.
  AttnShape alibi = shape(3, 1, 133, 8, 2, 16, 160, true);
  alibi.alibi_heads = 8;
  check_paged_flash<float>(alibi, 16, seed++);
}

TEST_CASE("cpu paged attention: a table entry outside the pool or too few pages throw") {
  const AttnShape a = shape(1, 1, 10, 2, 2, 4, 16, true);
  PagedLayout p;
  p.block = 4, p.max_blocks = 3, p.num_blocks = 3;
  std::vector<float> q(8), kv(static_cast<std::size_t>(3 * 4 * 8)), o(8), lse(2);
  std::vector<int32_t> table{0, 5, 2};
  CHECK_THROWS_AS(paged_flash_attention(q.data(), kv.data(), kv.data(), table.data(), p, o.data(), lse.data(), a),
                  std::out_of_range);
  table = {0, 1, 2};
  p.max_blocks = 2;  // 8 rows < seq_kv 10
  CHECK_THROWS_AS(paged_flash_attention(q.data(), kv.data(), kv.data(), table.data(), p, o.data(), lse.data(), a),
                  std::out_of_range);
}

TEST_CASE("cpu paged kv_append: new rows land in the table's pages, nothing else changes") {
  // batch 2, pages of 4 rows, 3 pages per sequence; append 3 rows at position 3 (crossing a page).
  PagedLayout p;
  p.block = 4, p.max_blocks = 3, p.num_blocks = 6;
  const std::vector<int32_t> table{4, 0, 2, 5, 1, 3};
  KvAppendShape s;
  s.batch = 2, s.seq_new = 3, s.row = 5, s.position = 3, s.capacity = 12;
  const auto k_new = random_vec(static_cast<std::size_t>(s.batch * s.seq_new * s.row), 700);
  std::vector<float> pages(static_cast<std::size_t>(p.num_blocks * p.block * s.row), -1.0f);
  paged_kv_append(k_new.data(), pages.data(), table.data(), s, p);
  std::vector<bool> written(static_cast<std::size_t>(p.num_blocks * p.block), false);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t) {
      const int64_t j = s.position + t;
      const int64_t r = table[static_cast<std::size_t>(b * 3 + j / 4)] * 4 + j % 4;
      written[static_cast<std::size_t>(r)] = true;
      for (int64_t x = 0; x < s.row; ++x)
        CHECK(pages[static_cast<std::size_t>(r * s.row + x)] == k_new[static_cast<std::size_t>((b * 3 + t) * s.row + x)]);
    }
  for (std::size_t r = 0; r < written.size(); ++r)
    if (!written[r]) CHECK(pages[r * 5] == -1.0f);
  s.position = 10;  // rows 10..12 pass the 12 rows the table spans
  CHECK_THROWS_AS(paged_kv_append(k_new.data(), pages.data(), table.data(), s, p), std::out_of_range);
}
