// Kernels over an fp8 KV cache (the fp8_kv pass: e4m3 bytes whose value is stored · scale): the
// three appends against the host's cuda_fp8.h conversion, byte for byte; every kernel that reads
// the cache (split-KV decode over a contiguous or a paged cache, flash attention's tensor-core
// and per-row kernels over a cache, a varlen step's decodes and prefill chunks) against an fp32
// reference computed on the host from the cache's bytes, dequantized. Random inputs, GQA (groups
// 4 and 8) and MHA, head_dim 64 and 128 (96 for the per-row kernels), scales 1 and 0.37 (not a
// power of two: a kernel that applies the scale wrongly, or not at all, fails). Cache rows and
// pages no query may read hold NaN bytes, so a kernel reading one fails; outputs are poisoned with
// NaN bytes, so an unwritten element fails. Tolerances as test_cuda_varlen.cpp: O's normalized
// max error ≤ 1e-2 (16-bit outputs; the tensor-core path rounds P to 16 bits), LSE within 1e-3.
#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/kernels/decode_attention.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"
#include "backends/cuda/kernels/memory_ops.cuh"
#include "backends/cuda/kernels/varlen_attention.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

using fp8 = __nv_fp8_e4m3;
constexpr uint8_t fp8_nan = 0x7F;  // e4m3 S.1111.111

// The host's conversions (cuda_fp8.h): round to nearest-even, saturated to ±448.
uint8_t to_e4m3(float x) { return fp8(x).__x; }
float from_e4m3(uint8_t b) {
  fp8 q;
  q.__x = b;
  return static_cast<float>(q);
}

ops::KvStorage fp8_kv(float scale) {
  ops::KvStorage kv;
  kv.fp8 = true;
  kv.scale = scale;
  return kv;
}

// n cache bytes holding U(−range, range) values stored with `scale`: e4m3(x / scale).
std::vector<uint8_t> random_cache(int64_t n, uint32_t seed, float scale, float range = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (auto& b : out) b = to_e4m3(dist(rng) / scale);
  return out;
}

// What the kernels must read: stored · scale (NaN bytes stay NaN).
std::vector<float> dequantized(const std::vector<uint8_t>& bytes, float scale) {
  std::vector<float> out(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) out[i] = from_e4m3(bytes[i]) * scale;
  return out;
}

template <class H>
std::vector<float> floats(const std::vector<H>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = host::to_f32(x[i]);
  return out;
}

// Attention of one query row q (d elements) over keys 0 .. vis − 1 whose K and V rows start at
// element key_row(j) of k and v, in double: O row and LSE (natural log of the denominator of the
// scaled scores; −inf and O = 0 when no key is visible).
template <class KeyRow>
void reference_row(const float* q, int64_t d, int64_t vis, KeyRow key_row, const std::vector<float>& k,
                   const std::vector<float>& v, float* o, float& lse) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> s(static_cast<size_t>(vis));
  double m = -INFINITY;
  for (int64_t j = 0; j < vis; ++j) {
    const float* kr = k.data() + key_row(j);
    double dot = 0;
    for (int64_t x = 0; x < d; ++x) dot += double(q[x]) * kr[x];
    s[size_t(j)] = dot * scale;
    m = std::max(m, s[size_t(j)]);
  }
  std::vector<double> acc(static_cast<size_t>(d), 0.0);
  double l = 0;
  for (int64_t j = 0; j < vis; ++j) {
    const double p = std::exp(s[size_t(j)] - m);
    l += p;
    const float* vr = v.data() + key_row(j);
    for (int64_t x = 0; x < d; ++x) acc[size_t(x)] += p * vr[x];
  }
  for (int64_t x = 0; x < d; ++x) o[x] = l > 0 ? static_cast<float>(acc[size_t(x)] / l) : 0.0f;
  lse = l > 0 ? static_cast<float>(m + std::log(l)) : -INFINITY;
}

// O: max|got − want| / max|want| (+inf for a non-finite output); LSE: max absolute error (0 where
// both are −inf, +inf for any other non-finite value).
template <class H>
std::pair<double, double> errors(const std::vector<H>& o, const std::vector<float>& o_ref,
                                 const std::vector<float>& lse, const std::vector<float>& lse_ref) {
  double diff = 0, range = 0, l_err = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    const double g = host::to_f32(o[i]);
    if (!std::isfinite(g)) return {INFINITY, INFINITY};
    diff = std::max(diff, std::abs(g - o_ref[i]));
    range = std::max(range, double(std::abs(o_ref[i])));
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(lse_ref[i]) && lse[i] == lse_ref[i]) continue;
    if (!std::isfinite(lse[i])) return {diff / range, INFINITY};
    l_err = std::max(l_err, double(std::abs(lse[i] - lse_ref[i])));
  }
  return {range > 0 ? diff / range : diff, l_err};
}

constexpr double o_tolerance = 1e-2;
constexpr double lse_tolerance = 1e-3;

// ---- appends ------------------------------------------------------------------------------

// n new-row elements: U(−3, 3), every seventh far past ±448·scale (it saturates), as H.
template <class H>
std::vector<H> new_rows(int64_t n, uint32_t seed, float scale) {
  auto x = random_values<H>(n, seed, -3, 3);
  for (int64_t i = 0; i < n; i += 7) x[size_t(i)] = host::from_f32<H>((i % 2 ? -1000.0f : 1000.0f) * scale);
  return x;
}

// Cache row `dst` of `row` bytes := new row `src`, quantized on the host.
template <class H>
void store_row(std::vector<uint8_t>& cache, int64_t dst, const std::vector<H>& k_new, int64_t src, int64_t row,
               float scale) {
  for (int64_t x = 0; x < row; ++x)
    cache[size_t(dst * row + x)] = to_e4m3(host::to_f32(k_new[size_t(src * row + x)]) / scale);
}

template <class D>
void check_appends(int64_t row, float scale) {
  using H = host_t<D>;
  CAPTURE(row);
  CAPTURE(scale);
  {  // contiguous: 2 sequences, 3 rows at position 5 of 9
    ops::KvAppendShape s{.batch = 2, .seq_new = 3, .capacity = 9, .row = row, .position = 5};
    s.kv = fp8_kv(scale);
    const auto k_new = new_rows<H>(s.batch * s.seq_new * row, 31, scale);
    auto want = random_cache(s.batch * s.capacity * row, 32, scale);
    DeviceBuffer<D> d_new(k_new);
    DeviceBuffer<fp8> d_cache(want);
    cuda::kv_append(d_new.get(), d_cache.get(), s, nullptr);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t t = 0; t < s.seq_new; ++t)
        store_row(want, b * s.capacity + s.position + t, k_new, b * s.seq_new + t, row, scale);
    CHECK(d_cache.template download<uint8_t>() == want);
    ops::KvAppendShape too_far = s;
    too_far.position = 7;
    CHECK_THROWS_AS(cuda::kv_append(d_new.get(), d_cache.get(), too_far, nullptr), std::out_of_range);
    ops::KvAppendShape as_float = s;  // the shape must say fp8 for an fp8 cache
    as_float.kv = {};
    CHECK_THROWS_AS(cuda::kv_append(d_new.get(), d_cache.get(), as_float, nullptr), std::logic_error);
  }
  {  // paged: 2 sequences, 5 rows at position 3 of pages of 4 (crossing a page); sequence 0's
     // second page is past the pool and sequence 1's is −1: both skipped
    const ops::PagedLayout p{.block = 4, .max_blocks = 3, .num_blocks = 7};
    const std::vector<int32_t> table{5, 7, 2, 1, -1, 6};
    ops::KvAppendShape s{.batch = 2, .seq_new = 5, .capacity = 12, .row = row, .position = 3};
    s.paged = p;
    s.kv = fp8_kv(scale);
    const auto k_new = new_rows<H>(s.batch * s.seq_new * row, 33, scale);
    auto want = random_cache(p.num_blocks * p.block * row, 34, scale);
    DeviceBuffer<D> d_new(k_new);
    DeviceBuffer<fp8> d_pages(want);
    DeviceBuffer<int32_t> d_table(table);
    cuda::paged_kv_append(d_new.get(), d_pages.get(), d_table.get(), s, p, nullptr);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t t = 0; t < s.seq_new; ++t) {
        const int64_t j = s.position + t, page = table[size_t(b * p.max_blocks + j / p.block)];
        if (page >= 0 && page < p.num_blocks)
          store_row(want, page * p.block + j % p.block, k_new, b * s.seq_new + t, row, scale);
      }
    CHECK(d_pages.template download<uint8_t>() == want);
  }
  {  // slots: 10 tokens into a pool of 24 rows, shuffled; a −1 slot and one past the pool skipped
    const int64_t tokens = 10, pool_rows = 24;
    std::vector<int32_t> slots(static_cast<size_t>(pool_rows));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), std::mt19937(35));
    slots.resize(static_cast<size_t>(tokens));
    slots[3] = -1;
    slots[7] = static_cast<int32_t>(pool_rows);
    const auto k_new = new_rows<H>(tokens * row, 36, scale);
    auto want = random_cache(pool_rows * row, 37, scale);
    DeviceBuffer<D> d_new(k_new);
    DeviceBuffer<fp8> d_pages(want);
    DeviceBuffer<int32_t> d_slots(slots);
    cuda::kv_append_slots(d_new.get(), d_pages.get(), d_slots.get(), tokens, row, pool_rows, nullptr, fp8_kv(scale));
    for (int64_t t = 0; t < tokens; ++t)
      if (slots[size_t(t)] >= 0 && slots[size_t(t)] < pool_rows)
        store_row(want, slots[size_t(t)], k_new, t, row, scale);
    CHECK(d_pages.template download<uint8_t>() == want);
  }
}

// ---- attention over a contiguous cache ----------------------------------------------------

enum class Kernel { decode, flash_m64, flash_m128 };

struct Dense {
  int64_t batch = 2, seq_q = 1, seq_kv = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = false;
};

template <class D>
void check_dense(const Dense& c, float scale, Kernel kernel, uint32_t seed) {
  using H = host_t<D>;
  CAPTURE(c.seq_q);
  CAPTURE(c.seq_kv);
  CAPTURE(c.heads);
  CAPTURE(c.kv_heads);
  CAPTURE(c.head_dim);
  CAPTURE(scale);
  CAPTURE(static_cast<int>(kernel));
  ops::AttnShape a;
  a.batch = c.batch, a.seq_q = c.seq_q, a.seq_kv = c.seq_kv, a.heads = c.heads, a.kv_heads = c.kv_heads;
  a.head_dim = c.head_dim, a.kv_capacity = c.seq_kv + 37, a.causal = c.causal;
  a.kv = fp8_kv(scale);
  const int64_t d = c.head_dim, row = c.kv_heads * d, group = c.heads / c.kv_heads;
  const int64_t q_n = c.batch * c.seq_q * c.heads * d, cache_n = c.batch * a.kv_capacity * row;
  const auto q = random_values<H>(q_n, seed, -2, 2);
  auto k8 = random_cache(cache_n, seed + 1, scale), v8 = random_cache(cache_n, seed + 2, scale);
  for (int64_t b = 0; b < c.batch; ++b)  // rows past seq_kv: never read
    for (int64_t i = (b * a.kv_capacity + c.seq_kv) * row; i < (b + 1) * a.kv_capacity * row; ++i)
      k8[size_t(i)] = v8[size_t(i)] = fp8_nan;
  const std::vector<float> qf = floats(q), k = dequantized(k8, scale), v = dequantized(v8, scale);
  std::vector<float> o_ref(static_cast<size_t>(q_n)), lse_ref(static_cast<size_t>(c.batch * c.heads * c.seq_q));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.seq_q; ++i)
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t vis = c.causal ? std::clamp<int64_t>(c.seq_kv - c.seq_q + i + 1, 0, c.seq_kv) : c.seq_kv;
        const int64_t at = ((b * c.seq_q + i) * c.heads + h) * d;
        reference_row(
            qf.data() + at, d, vis, [&](int64_t j) { return (b * a.kv_capacity + j) * row + h / group * d; }, k, v,
            o_ref.data() + at, lse_ref[size_t((b * c.heads + h) * c.seq_q + i)]);
      }

  DeviceBuffer<D> dq(q), d_o(q_n);
  DeviceBuffer<fp8> dk(k8), dv(v8);
  DeviceBuffer<float> dlse(c.batch * c.heads * c.seq_q);
  d_o.poison();
  dlse.poison();
  if (kernel == Kernel::decode) {
    DeviceBuffer<float> ws(cuda::decode_attention_workspace_bytes(a) / 4 + 1);
    cuda::decode_attention(dq.get(), dk.get(), dv.get(), d_o.get(), dlse.get(), a, ws.get(), nullptr);
  } else {
    cuda::flash_attention(dq.get(), dk.get(), dv.get(), d_o.get(), dlse.get(), a, nullptr,
                          kernel == Kernel::flash_m64 ? 64 : 128);
  }
  const auto [o_err, l_err] = errors(d_o.download(), o_ref, dlse.download(), lse_ref);
  CHECK(o_err <= o_tolerance);
  CHECK(l_err <= lse_tolerance);
}

// ---- paged decode -------------------------------------------------------------------------

// Pages for `kv_len` keys of each sequence, shuffled in a pool with 3 spare pages; the table
// [seqs, max_blocks] has −1 past a sequence's pages.
struct Pool {
  ops::PagedLayout layout;
  std::vector<int32_t> table;
};

Pool make_pool(const std::vector<int64_t>& kv_len, int64_t block, uint32_t seed) {
  Pool p;
  p.layout.block = block;
  int64_t used = 0;
  for (int64_t kv : kv_len) {
    p.layout.max_blocks = std::max(p.layout.max_blocks, (kv + block - 1) / block + 1);
    used += (kv + block - 1) / block;
  }
  p.layout.num_blocks = used + 3;
  std::vector<int32_t> pages(static_cast<size_t>(p.layout.num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(seed));
  p.table.assign(kv_len.size() * static_cast<size_t>(p.layout.max_blocks), -1);
  size_t next = 0;
  for (size_t s = 0; s < kv_len.size(); ++s)
    for (int64_t b = 0; b * block < kv_len[s]; ++b)
      p.table[s * size_t(p.layout.max_blocks) + size_t(b)] = pages[next++];
  return p;
}

// K or V pages of `row` bytes per key: random where a sequence's key lives, NaN elsewhere (spare
// pages, rows past a sequence's keys).
std::vector<uint8_t> pool_bytes(const Pool& p, const std::vector<int64_t>& kv_len, int64_t row, float scale,
                                uint32_t seed) {
  const auto random = random_cache(p.layout.num_blocks * p.layout.block * row, seed, scale);
  std::vector<uint8_t> out(random.size(), fp8_nan);
  for (size_t s = 0; s < kv_len.size(); ++s)
    for (int64_t j = 0; j < kv_len[s]; ++j) {
      const int64_t r = p.layout.row(p.table.data(), int64_t(s), j);
      std::copy_n(random.begin() + r * row, row, out.begin() + r * row);
    }
  return out;
}

template <class D>
void check_paged(int64_t heads, int64_t kv_heads, int64_t d, int64_t block, float scale, uint32_t seed) {
  using H = host_t<D>;
  CAPTURE(heads);
  CAPTURE(kv_heads);
  CAPTURE(d);
  CAPTURE(block);
  CAPTURE(scale);
  const std::vector<int64_t> kv_len{700, 700};  // the paged decode's sequences share seq_kv
  const Pool p = make_pool(kv_len, block, seed);
  ops::AttnShape a;
  a.batch = 2, a.seq_q = 1, a.seq_kv = kv_len[0], a.heads = heads, a.kv_heads = kv_heads, a.head_dim = d;
  a.kv_capacity = p.layout.max_blocks * block;
  a.paged = p.layout;
  a.kv = fp8_kv(scale);
  const int64_t row = kv_heads * d, group = heads / kv_heads, q_n = a.batch * heads * d;
  const auto q = random_values<H>(q_n, seed, -2, 2);
  const auto k8 = pool_bytes(p, kv_len, row, scale, seed + 1), v8 = pool_bytes(p, kv_len, row, scale, seed + 2);
  const std::vector<float> qf = floats(q), k = dequantized(k8, scale), v = dequantized(v8, scale);
  std::vector<float> o_ref(static_cast<size_t>(q_n)), lse_ref(static_cast<size_t>(a.batch * heads));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      reference_row(
          qf.data() + (b * heads + h) * d, d, a.seq_kv,
          [&](int64_t j) { return p.layout.row(p.table.data(), b, j) * row + h / group * d; }, k, v,
          o_ref.data() + (b * heads + h) * d, lse_ref[size_t(b * heads + h)]);
  DeviceBuffer<D> dq(q), d_o(q_n);
  DeviceBuffer<fp8> dk(k8), dv(v8);
  DeviceBuffer<int32_t> dt(p.table);
  DeviceBuffer<float> dlse(a.batch * heads), ws(cuda::decode_attention_workspace_bytes(a) / 4 + 1);
  d_o.poison();
  dlse.poison();
  cuda::paged_decode_attention(dq.get(), dk.get(), dv.get(), dt.get(), int(block), int(p.layout.max_blocks), d_o.get(),
                               dlse.get(), a, ws.get(), nullptr);
  const auto [o_err, l_err] = errors(d_o.download(), o_ref, dlse.download(), lse_ref);
  CHECK(o_err <= o_tolerance);
  CHECK(l_err <= lse_tolerance);
}

// ---- a varlen step ------------------------------------------------------------------------

enum class Merge { cluster, workspace };

// Sequences (q_len, kv_len), the first `decodes` of them single queries.
template <class D>
void check_varlen(const std::vector<std::pair<int64_t, int64_t>>& seqs, int64_t decodes, int64_t heads,
                  int64_t kv_heads, int64_t d, float scale, Merge merge, uint32_t seed) {
  using H = host_t<D>;
  CAPTURE(heads);
  CAPTURE(kv_heads);
  CAPTURE(d);
  CAPTURE(scale);
  CAPTURE(static_cast<int>(merge));
  std::vector<int64_t> kv_len;
  std::vector<int32_t> query_start{0}, kv32;
  ops::VarlenAttnShape a;
  for (const auto& [q_len, kv] : seqs) {
    kv_len.push_back(kv);
    kv32.push_back(static_cast<int32_t>(kv));
    query_start.push_back(query_start.back() + static_cast<int32_t>(q_len));
    a.max_q = std::max(a.max_q, q_len);
    a.max_kv = std::max(a.max_kv, kv);
  }
  const Pool p = make_pool(kv_len, 16, seed);
  a.seqs = static_cast<int64_t>(seqs.size()), a.tokens = query_start.back();
  a.heads = heads, a.kv_heads = kv_heads, a.head_dim = d, a.decode_seqs = decodes;
  a.paged = p.layout;
  a.kv = fp8_kv(scale);
  const int64_t row = kv_heads * d, group = heads / kv_heads, q_n = a.tokens * heads * d;
  const auto q = random_values<H>(q_n, seed, -2, 2);
  const auto k8 = pool_bytes(p, kv_len, row, scale, seed + 1), v8 = pool_bytes(p, kv_len, row, scale, seed + 2);
  const std::vector<float> qf = floats(q), k = dequantized(k8, scale), v = dequantized(v8, scale);
  std::vector<float> o_ref(static_cast<size_t>(q_n)), lse_ref(static_cast<size_t>(heads * a.tokens));
  for (int64_t s = 0; s < a.seqs; ++s) {
    const int64_t q_len = seqs[size_t(s)].first, kv = kv_len[size_t(s)];
    for (int64_t i = 0; i < q_len; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t t = query_start[size_t(s)] + i, at = (t * heads + h) * d;
        reference_row(
            qf.data() + at, d, kv - q_len + i + 1,
            [&](int64_t j) { return p.layout.row(p.table.data(), s, j) * row + h / group * d; }, k, v,
            o_ref.data() + at, lse_ref[size_t(h * a.tokens + t)]);
      }
  }
  DeviceBuffer<D> dq(q), d_o(q_n);
  DeviceBuffer<fp8> dk(k8), dv(v8);
  DeviceBuffer<int32_t> dt(p.table), dqs(query_start), dkv(kv32);
  DeviceBuffer<float> dlse(heads * a.tokens);
  const int64_t ws_bytes = merge == Merge::workspace ? cuda::varlen_attention_workspace_bytes(a) : 0;
  DeviceBuffer<float> ws(ws_bytes / 4 + 1);
  d_o.poison();
  dlse.poison();
  cuda::varlen_flash_attention(dq.get(), dk.get(), dv.get(), dt.get(), dqs.get(), dkv.get(), d_o.get(), dlse.get(), a,
                               nullptr, ws_bytes > 0 ? ws.get() : nullptr, ws_bytes);
  const auto [o_err, l_err] = errors(d_o.download(), o_ref, dlse.download(), lse_ref);
  INFO("decode splits " << cuda::varlen_decode_splits(a) << ", workspace " << ws_bytes);
  CHECK(o_err <= o_tolerance);
  CHECK(l_err <= lse_tolerance);
}

// 5 decodes (contexts 1..700: one key, a page and a bit, several splits), a chunk of 200 queries
// after 300 cached keys, a sequence with no query, a whole prompt of 130.
const std::vector<std::pair<int64_t, int64_t>> mixed{{1, 1},   {1, 17},    {1, 64}, {1, 333},
                                                     {1, 700}, {200, 500}, {0, 40}, {130, 130}};

}  // namespace

TEST_CASE_TEMPLATE("cuda fp8 kv: the appends store e4m3(x / scale) byte for byte", D, __nv_bfloat16, __half, float) {
  for (const float scale : {1.0f, 0.37f})
    for (const int64_t row : {int64_t{128}, int64_t{12}})  // 16-byte loads of new rows; element by element
      check_appends<D>(row, scale);
}

TEST_CASE_TEMPLATE("cuda fp8 kv: split-KV decode over a contiguous cache matches the dequantized reference", D,
                   __nv_bfloat16, __half) {
  for (const float scale : {1.0f, 0.37f}) {
    check_dense<D>({.seq_q = 1, .seq_kv = 700, .heads = 8, .kv_heads = 2, .head_dim = 128}, scale, Kernel::decode, 41);
    check_dense<D>({.seq_q = 1, .seq_kv = 333, .heads = 4, .kv_heads = 4, .head_dim = 64}, scale, Kernel::decode, 42);
    // 3 causal queries of a GQA group of 8: 24 rows, passes of 4
    check_dense<D>({.seq_q = 3, .seq_kv = 500, .heads = 16, .kv_heads = 2, .head_dim = 64, .causal = true}, scale,
                   Kernel::decode, 43);
    // head_dim 96: the decode launcher falls back to flash attention's per-row kernel
    check_dense<D>({.seq_q = 1, .seq_kv = 300, .heads = 8, .kv_heads = 2, .head_dim = 96}, scale, Kernel::decode, 44);
  }
}

TEST_CASE("cuda fp8 kv: paged decode over shuffled pages matches the dequantized reference") {
  for (const float scale : {1.0f, 0.37f})
    for (const int64_t block : {16, 12}) {  // a power of two (shift and mask) and not
      check_paged<__nv_bfloat16>(8, 2, 128, block, scale, 51);
      check_paged<__nv_bfloat16>(4, 4, 64, block, scale, 52);
    }
  check_paged<__half>(32, 4, 128, 16, 0.37f, 53);  // GQA 8
}

TEST_CASE_TEMPLATE("cuda fp8 kv: flash attention over a cache (a prefill after cached keys) matches the reference", D,
                   __nv_bfloat16, __half) {
  // 100 causal queries after 200 cached keys: the tensor-core kernel (64- and 128-row query tiles,
  // several 64-key tiles, the diagonal) for head_dim 64 and 128, the per-row kernel for 96.
  for (const float scale : {1.0f, 0.37f}) {
    for (const int64_t d : {128, 64})
      for (const Kernel k : {Kernel::flash_m64, Kernel::flash_m128}) {
        check_dense<D>({.seq_q = 100, .seq_kv = 300, .heads = 8, .kv_heads = 2, .head_dim = d, .causal = true}, scale,
                       k, 61);
        check_dense<D>({.seq_q = 100, .seq_kv = 300, .heads = 4, .kv_heads = 4, .head_dim = d, .causal = true}, scale,
                       k, 62);
      }
    check_dense<D>({.seq_q = 20, .seq_kv = 70, .heads = 8, .kv_heads = 2, .head_dim = 96, .causal = true}, scale,
                   Kernel::flash_m64, 63);
  }
}

TEST_CASE("cuda fp8 kv: a varlen step's decodes and prefill chunks match the dequantized reference") {
  for (const float scale : {1.0f, 0.37f})
    for (const int64_t d : {128, 64})
      for (const int64_t group : {4, 1, 8}) {
        const int64_t kv_heads = group == 8 ? 2 : 4;
        for (const Merge m : {Merge::cluster, Merge::workspace})
          check_varlen<__nv_bfloat16>(mixed, 5, kv_heads * group, kv_heads, d, scale, m, 71);
      }
  // head_dim 96: no decode kernel, every sequence through the per-row prefill kernel.
  check_varlen<__nv_bfloat16>(mixed, 5, 8, 2, 96, 0.37f, Merge::cluster, 72);
  check_varlen<__half>(mixed, 5, 8, 2, 128, 0.37f, Merge::workspace, 73);
}
