// The CPU kernels over an fp8 e4m3 KV cache (the fp8_kv pass): the appends store e4m3(x / scale)
// rows (contiguous, through a shuffled block table, through page slots), and the three forward
// attentions read them as stored · scale: against a naive double reference over the dequantized
// cache, and equal to the same kernel run on that dequantized cache in fp32; GQA, decode,
// prefill, scales other than 1; a kernel handed a cache of the other storage throws; an fp8
// cache's initial values are the fp32 cache's, quantized with its scale.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim::cpu;
using namespace perfsim::cpu::test;

namespace {

std::size_t at(int64_t i) { return static_cast<std::size_t>(i); }

// An fp8 cache of `values` at `scale`, and what it holds (stored · scale) in fp32.
struct Fp8Cache {
  std::vector<fp8_e4m3> bytes;
  std::vector<float> values;
};
Fp8Cache quantize(const std::vector<float>& x, float scale) {
  Fp8Cache c;
  for (float v : x) {
    c.bytes.emplace_back(v / scale);
    c.values.push_back(to_f32(c.bytes.back()) * scale);
  }
  return c;
}

// Softmax attention of one query row over n key/value rows, in double from the definition:
// o = Σ_j softmax_j(q·k_j / √d) v_j, lse = log Σ_j e^(q·k_j / √d).
void naive_attend(const float* q, int64_t n, const std::function<const float*(int64_t)>& k_row,
                  const std::function<const float*(int64_t)>& v_row, int64_t d, double* o, double& lse) {
  std::vector<double> s(at(n));
  double mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    double dot = 0;
    for (int64_t x = 0; x < d; ++x) dot += double(q[x]) * k_row(j)[x];
    s[at(j)] = dot / std::sqrt(double(d));
    mx = std::max(mx, s[at(j)]);
  }
  double sum = 0;
  for (double v : s) sum += std::exp(v - mx);
  std::fill(o, o + d, 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t x = 0; x < d; ++x) o[x] += std::exp(s[at(j)] - mx) / sum * v_row(j)[x];
  lse = mx + std::log(sum);
}

AttnShape shape(int64_t batch, int64_t sq, int64_t skv, int64_t heads, int64_t kvh, int64_t d, int64_t cap,
                float scale) {
  AttnShape a;
  a.batch = batch, a.seq_q = sq, a.seq_kv = skv, a.heads = heads, a.kv_heads = kvh, a.head_dim = d;
  a.kv_capacity = cap, a.grad_capacity = skv, a.causal = true;
  a.kv.fp8 = true, a.kv.scale = scale;
  return a;
}

const AttnShape cases[] = {
    shape(2, 1, 13, 8, 2, 16, 20, 1.0f),    // GQA decode over a longer cache
    shape(1, 1, 133, 8, 2, 16, 160, 0.25f), // decode across several tiles; a small scale
    shape(2, 5, 7, 8, 2, 16, 7, 2.0f),      // prefill-like with a kv prefix, causal
    shape(1, 3, 11, 6, 3, 5, 16, 1.0f),     // odd head_dim
};

// Contiguous [b, cap, kvh, d] K/V values; the kernel reads the fp8 cache, the reference its values.
template <class T>
void check_flash_fp8(const AttnShape& a, uint64_t seed) {
  const auto nq = at(a.batch * a.seq_q * a.heads * a.head_dim);
  const auto nkv = at(a.batch * a.kv_capacity * a.kv_heads * a.head_dim);
  const auto q = to_storage<T>(random_vec(nq, seed));
  const Fp8Cache k = quantize(random_vec(nkv, seed + 1), a.kv.scale);
  const Fp8Cache v = quantize(random_vec(nkv, seed + 2), a.kv.scale);
  std::vector<T> o(nq);
  std::vector<float> lse(at(a.batch * a.heads * a.seq_q));
  flash_attention(q.data(), k.bytes.data(), v.bytes.data(), o.data(), lse.data(), a);

  const std::vector<float> qf = to_floats(q);
  std::vector<double> want(nq), want_lse(lse.size());
  const int64_t d = a.head_dim;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t i = 0; i < a.seq_q; ++i)
      for (int64_t h = 0; h < a.heads; ++h) {
        const int64_t kh = h / a.group();
        auto kv_row = [&](const std::vector<float>& c) {
          const float* base = c.data() + (b * a.kv_capacity * a.kv_heads + kh) * d;
          const int64_t stride = a.kv_heads * d;
          return [base, stride](int64_t j) { return base + j * stride; };
        };
        const int64_t at_q = ((b * a.seq_q + i) * a.heads + h) * d;
        naive_attend(qf.data() + at_q, a.visible(i), kv_row(k.values), kv_row(v.values), d, want.data() + at_q,
                     want_lse[at((b * a.heads + h) * a.seq_q + i)]);
      }
  CHECK(rel_err(to_floats(o), want) < tolerance<T>());
  CHECK(rel_err(lse, want_lse) < 1e-5);

  // The same kernel over the dequantized cache in fp32: the same arithmetic, the same results.
  if constexpr (std::is_same_v<T, float>) {
    AttnShape dense = a;
    dense.kv = {};
    std::vector<float> o_dense(nq), lse_dense(lse.size());
    flash_attention(q.data(), k.values.data(), v.values.data(), o_dense.data(), lse_dense.data(), dense);
    CHECK(o == o_dense);
    CHECK(lse == lse_dense);
  }

  // Through pages: the cache's rows scattered by a shuffled table, read as the contiguous kernel does.
  PagedLayout p;
  p.block = 4;
  p.max_blocks = (a.seq_kv + p.block - 1) / p.block;
  p.num_blocks = a.batch * p.max_blocks + 2;  // two pages no sequence owns
  std::vector<int32_t> pool(at(p.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  const std::vector<int32_t> table(pool.begin(), pool.begin() + a.batch * p.max_blocks);
  const int64_t row = a.kv_heads * d;
  std::vector<fp8_e4m3> kp(at(p.num_blocks * p.block * row), fp8_e4m3(99.0f)), vp(kp.size(), fp8_e4m3(99.0f));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t j = 0; j < a.seq_kv; ++j) {
      const int64_t r = paged_row(table.data(), p, b, j);
      std::copy_n(k.bytes.begin() + (b * a.kv_capacity + j) * row, row, kp.begin() + r * row);
      std::copy_n(v.bytes.begin() + (b * a.kv_capacity + j) * row, row, vp.begin() + r * row);
    }
  AttnShape paged = a;
  paged.kv_capacity = p.block * p.max_blocks;
  std::vector<T> o_paged(nq);
  std::vector<float> lse_paged(lse.size());
  paged_flash_attention(q.data(), kp.data(), vp.data(), table.data(), p, o_paged.data(), lse_paged.data(), paged);
  CHECK(to_floats(o_paged) == to_floats(o));
  CHECK(lse_paged == lse);
}

}  // namespace

TEST_CASE("cpu fp8 kv: flash and paged attention read an fp8 cache as stored · scale") {
  uint64_t seed = 1000;
  for (const AttnShape& a : cases) {
    CAPTURE(a.seq_q);
    CAPTURE(a.seq_kv);
    CAPTURE(a.kv.scale);
    check_flash_fp8<float>(a, seed++);
    check_flash_fp8<bf16>(a, seed++);
    check_flash_fp8<half>(a, seed++);
  }
}

namespace {

// A serving step's packed sequences: q_len queries each, kv_len keys, pages of `block` rows in a
// shuffled pool with a few pages no sequence owns.
template <class T>
void check_varlen_fp8(const std::vector<int32_t>& q_len, const std::vector<int32_t>& kv_len, int64_t heads,
                      int64_t kv_heads, int64_t d, int64_t block, float scale, uint64_t seed) {
  VarlenAttnShape a;
  a.seqs = static_cast<int64_t>(q_len.size());
  a.heads = heads, a.kv_heads = kv_heads, a.head_dim = d;
  std::vector<int32_t> query_start{0};
  for (int32_t n : q_len) query_start.push_back(query_start.back() + n);
  a.tokens = query_start.back();
  a.max_q = *std::max_element(q_len.begin(), q_len.end());
  a.max_kv = *std::max_element(kv_len.begin(), kv_len.end());
  while (a.decode_seqs < a.seqs && q_len[at(a.decode_seqs)] == 1) ++a.decode_seqs;
  a.paged.block = block;
  a.paged.max_blocks = (a.max_kv + block - 1) / block;
  a.paged.num_blocks = a.seqs * a.paged.max_blocks + 3;
  a.kv.fp8 = true, a.kv.scale = scale;
  std::vector<int32_t> pool(at(a.paged.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  const std::vector<int32_t> table(pool.begin(), pool.begin() + a.seqs * a.paged.max_blocks);

  const int64_t row = kv_heads * d;
  const auto pool_elements = at(a.paged.num_blocks * block * row);
  const auto q = to_storage<T>(random_vec(at(a.tokens * heads * d), seed + 1));
  const Fp8Cache k = quantize(random_vec(pool_elements, seed + 2), scale);
  const Fp8Cache v = quantize(random_vec(pool_elements, seed + 3), scale);
  std::vector<T> o(q.size());
  std::vector<float> lse(at(heads * a.tokens));
  varlen_flash_attention(q.data(), k.bytes.data(), v.bytes.data(), table.data(), query_start.data(), kv_len.data(),
                         o.data(), lse.data(), a);

  const std::vector<float> qf = to_floats(q);
  std::vector<double> want(q.size()), want_lse(lse.size());
  for (int64_t s = 0; s < a.seqs; ++s)
    for (int64_t t = query_start[at(s)]; t < query_start[at(s + 1)]; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kh = h / a.group();
        const int64_t visible = kv_len[at(s)] - q_len[at(s)] + (t - query_start[at(s)]) + 1;
        auto kv_row = [&](const std::vector<float>& c) {
          const float* base = c.data() + kh * d;
          const int32_t* tp = table.data();
          const PagedLayout pl = a.paged;
          const int64_t stride = kv_heads * d;
          return [base, tp, pl, s, stride](int64_t j) { return base + pl.row(tp, s, j) * stride; };
        };
        naive_attend(qf.data() + (t * heads + h) * d, visible, kv_row(k.values), kv_row(v.values), d,
                     want.data() + (t * heads + h) * d, want_lse[at(h * a.tokens + t)]);
      }
  CHECK(rel_err(to_floats(o), want) < tolerance<T>());
  CHECK(rel_err(lse, want_lse) < 1e-5);
  if constexpr (std::is_same_v<T, float>) {  // the fp32 kernel over the dequantized pool
    VarlenAttnShape dense = a;
    dense.kv = {};
    std::vector<float> o_dense(q.size()), lse_dense(lse.size());
    varlen_flash_attention(q.data(), k.values.data(), v.values.data(), table.data(), query_start.data(),
                           kv_len.data(), o_dense.data(), lse_dense.data(), dense);
    CHECK(o == o_dense);
    CHECK(lse == lse_dense);
  }
}

}  // namespace

TEST_CASE("cpu fp8 kv: varlen attention reads fp8 pages as stored · scale") {
  uint64_t seed = 2000;
  // Two decodes, a chunk after cached tokens and a whole prompt; GQA groups of 4 and of 1.
  for (float scale : {1.0f, 0.5f}) {
    CAPTURE(scale);
    check_varlen_fp8<float>({1, 1, 5, 9}, {17, 3, 12, 9}, 8, 2, 16, 4, scale, seed++);
    check_varlen_fp8<bf16>({1, 1, 5, 9}, {17, 3, 12, 9}, 8, 2, 16, 4, scale, seed++);
    check_varlen_fp8<half>({1, 6}, {70, 6}, 4, 4, 8, 16, scale, seed++);
    check_varlen_fp8<float>({1, 6}, {70, 6}, 4, 4, 8, 16, scale, seed++);
  }
}

namespace {

// The byte an fp8 cache holds for a new value x of type T.
template <class T> uint8_t stored_byte(T x, float scale) { return fp8_e4m3::from_float(to_f32(x) / scale); }

}  // namespace

TEST_CASE("cpu fp8 kv: the appends store e4m3(x / scale) rows, saturated, and touch nothing else") {
  const float scale = 0.25f;
  const fp8_e4m3 untouched(-7.0f);
  // Contiguous: batch 2, a cache of 5 rows of 6, 2 new rows at position 2.
  KvAppendShape s;
  s.batch = 2, s.seq_new = 2, s.row = 6, s.position = 2, s.capacity = 5;
  s.kv.fp8 = true, s.kv.scale = scale;
  auto k_new = to_storage<bf16>(random_vec(at(s.batch * s.seq_new * s.row), 3000));
  k_new[0] = bf16(1000.0f);  // 4000 after the scale: saturates to 448
  k_new[1] = bf16(-1000.0f);
  std::vector<fp8_e4m3> cache(at(s.batch * s.capacity * s.row), untouched);
  kv_append(k_new.data(), cache.data(), s);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t j = 0; j < s.capacity; ++j)
      for (int64_t x = 0; x < s.row; ++x) {
        const uint8_t got = cache[at((b * s.capacity + j) * s.row + x)].bits;
        const bool written = j >= s.position && j < s.position + s.seq_new;
        CHECK(got == (written ? stored_byte(k_new[at((b * s.seq_new + j - s.position) * s.row + x)], scale)
                              : untouched.bits));
      }
  CHECK(to_f32(cache[at(2 * s.row)]) == 448.0f);  // batch 0, row 2: k_new[0] and [1]
  CHECK(to_f32(cache[at(2 * s.row + 1)]) == -448.0f);

  // Paged: pages of 3 rows, 2 per sequence, shuffled; 2 rows at position 2 cross a page.
  PagedLayout p;
  p.block = 3, p.max_blocks = 2, p.num_blocks = 5;
  const std::vector<int32_t> table{3, 0, 4, 1};
  s.capacity = 6;
  std::vector<fp8_e4m3> pages(at(p.num_blocks * p.block * s.row), untouched);
  paged_kv_append(k_new.data(), pages.data(), table.data(), s, p);
  std::vector<bool> written(at(p.num_blocks * p.block), false);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq_new; ++t) {
      const int64_t r = paged_row(table.data(), p, b, s.position + t);
      written[at(r)] = true;
      for (int64_t x = 0; x < s.row; ++x)
        CHECK(pages[at(r * s.row + x)].bits == stored_byte(k_new[at((b * s.seq_new + t) * s.row + x)], scale));
    }
  for (std::size_t r = 0; r < written.size(); ++r)
    if (!written[r])
      for (int64_t x = 0; x < s.row; ++x) CHECK(pages[r * at(s.row) + at(x)].bits == untouched.bits);

  // Through page slots (varlen): token t into pool row slots[t]; −1 skipped.
  const std::vector<float> rows = random_vec(4 * 6, 3001);
  const std::vector<int32_t> slots{7, -1, 0, 14};
  std::vector<fp8_e4m3> pool(15 * 6, untouched);
  kv_append_slots(rows.data(), pool.data(), slots.data(), 4, 6, 15, s.kv);
  for (int64_t r = 0; r < 15; ++r)
    for (int64_t x = 0; x < 6; ++x) {
      const auto t = std::find(slots.begin(), slots.end(), r);
      const uint8_t want =
          t == slots.end() ? untouched.bits : stored_byte(rows[at((t - slots.begin()) * 6 + x)], scale);
      CHECK(pool[at(r * 6 + x)].bits == want);
    }
}

TEST_CASE("cpu fp8 kv: a kernel handed a cache of the other storage throws") {
  KvAppendShape s;
  s.batch = 1, s.seq_new = 1, s.row = 2, s.position = 0, s.capacity = 1;
  std::vector<float> k_new(2, 1.0f), cache(2);
  std::vector<fp8_e4m3> cache8(2);
  CHECK_THROWS_AS(kv_append(k_new.data(), cache8.data(), s), std::logic_error);  // shape says float
  s.kv.fp8 = true;
  CHECK_THROWS_AS(kv_append(k_new.data(), cache.data(), s), std::logic_error);   // shape says fp8
  s.kv.scale = 0;
  CHECK_THROWS_AS(kv_append(k_new.data(), cache8.data(), s), std::logic_error);  // no scale

  AttnShape a = shape(1, 1, 2, 2, 2, 2, 2, 1.0f);
  std::vector<float> q(4), o(4), lse(2), kv(8);
  CHECK_THROWS_AS(flash_attention(q.data(), kv.data(), kv.data(), o.data(), lse.data(), a), std::logic_error);
  a.kv = {};
  std::vector<fp8_e4m3> kv8(8);
  CHECK_THROWS_AS(flash_attention(q.data(), kv8.data(), kv8.data(), o.data(), lse.data(), a), std::logic_error);
}

TEST_CASE("cpu fp8 kv: an fp8 cache starts as e4m3(x / kv_scale) of the values an fp32 cache starts from") {
  // One cache and the op that appends to it; the initial values are the same generator's either way.
  auto graph = [](perfsim::DType cache_type, double kv_scale) {
    perfsim::Graph g;
    perfsim::Tensor k_new, cache;
    k_new.name = "k_new", k_new.shape = {2, 1, 2, 8}, k_new.role = perfsim::TensorRole::activation;
    cache.name = "layer0.attn.k_cache", cache.shape = {2, 16, 2, 8}, cache.role = perfsim::TensorRole::kv_cache;
    cache.dtype = cache_type;
    const int kn = g.add_tensor(k_new), c = g.add_tensor(cache);
    perfsim::Op op;
    op.kind = perfsim::OpKind::kv_append, op.name = "append";
    op.inputs = {kn, c}, op.outputs = {c};
    op.attrs.kv_scale = kv_scale;
    g.add_op(op);
    return g;
  };
  const perfsim::Graph f32 = graph(perfsim::DType::fp32, 1), f8 = graph(perfsim::DType::fp8, 0.5);
  const int id = f8.find_tensor("layer0.attn.k_cache");
  CHECK(kv_scale_of(f8, id) == 0.5f);
  std::vector<float> x(512);
  std::vector<fp8_e4m3> q(512, fp8_e4m3(99.0f));
  std::vector<void*> buffers(2, nullptr);
  buffers[at(id)] = x.data();
  fill_persistent(f32, buffers, 11);
  buffers[at(id)] = q.data();
  fill_persistent(f8, buffers, 11);
  double sq = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    CHECK(q[i].bits == fp8_e4m3::from_float(x[i] / 0.5f));
    sq += double(x[i]) * x[i];
  }
  CHECK(std::sqrt(sq / 512) > 0.5);  // N(0, 1) values, not zeros
}
