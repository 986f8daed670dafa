// A serving engine's step on the CPU (the varlen kinds): T tokens of S sequences of different
// lengths packed in one tensor. Attention reads each sequence's keys through its block table,
// the query rows it owns given by query_start; appends write each token's row to its page slot
// (pages in the op's type or fp8, read and written a row at a time as kernel_util.hpp says);
// the last-token slice gathers the rows asked for. rope_at sits beside rope (cpu_pointwise.cpp),
// whose rotation it shares. Every kernel checks its metadata before touching memory. With ALiBi
// attention biases each query's scores by its position in its sequence.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"
#include "core/graph/alibi.hpp"

namespace perfsim::cpu {

using detail::axpy;
using detail::dot;
using detail::thread_scratch;

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();
// Keys scored per online-softmax step: one rescale of the accumulator per block of keys.
constexpr int64_t key_block = 64;

[[noreturn]] void bad_metadata(const std::string& what) {
  throw std::out_of_range("varlen attention: " + what);
}

// The rules of VarlenAttnShape's comment, checked before any row is read: a bad value would
// otherwise index outside Q, O or the page pool.
void check_metadata(const int32_t* table, const int32_t* query_start, const int32_t* kv_len,
                    const VarlenAttnShape& a) {
  const PagedLayout& p = a.paged;
  if (p.block <= 0 || p.max_blocks <= 0)
    bad_metadata(fmt::format("a page pool of {} rows per page and {} pages per sequence", p.block, p.max_blocks));
  if (a.decode_seqs < 0 || a.decode_seqs > a.seqs)
    bad_metadata(fmt::format("decode_seqs = {} is outside 0..{} sequences", a.decode_seqs, a.seqs));
  if (query_start[0] != 0) bad_metadata(fmt::format("query_start[0] = {}, not 0", query_start[0]));
  const int64_t table_rows = p.block * p.max_blocks;
  for (int64_t s = 0; s < a.seqs; ++s) {
    const int64_t first = query_start[s], next = query_start[s + 1];
    if (next < first)
      bad_metadata(fmt::format("query_start[{}] = {} is less than query_start[{}] = {}", s + 1, next, s, first));
    const int64_t q_len = next - first, kv = kv_len[s];
    if (q_len > a.max_q)
      bad_metadata(fmt::format("sequence {} has {} queries, more than max_q = {}", s, q_len, a.max_q));
    if (s < a.decode_seqs && q_len != 1)
      bad_metadata(fmt::format("sequence {} is one of the {} leading decodes but has {} queries", s,
                               a.decode_seqs, q_len));
    if (kv < q_len)
      bad_metadata(fmt::format("sequence {} has kv_len = {}, fewer than its {} queries", s, kv, q_len));
    if (kv > a.max_kv) bad_metadata(fmt::format("sequence {} has kv_len = {}, more than max_kv = {}", s, kv, a.max_kv));
    if (kv > table_rows)
      bad_metadata(fmt::format("sequence {} has kv_len = {}, more than its {} pages of {} rows hold", s, kv,
                               p.max_blocks, p.block));
    for (int64_t j = 0; j < kv; j += p.block) {
      const int32_t page = table[s * p.max_blocks + j / p.block];
      if (page < 0 || page >= p.num_blocks)
        bad_metadata(fmt::format("block table entry [{}][{}] = {} is outside the {} pages", s, j / p.block, page,
                                 p.num_blocks));
    }
  }
  if (query_start[a.seqs] != a.tokens)
    bad_metadata(fmt::format("query_start[{}] = {}, not the {} tokens", a.seqs, query_start[a.seqs], a.tokens));
}

}  // namespace

template <class T, class C>
void varlen_flash_attention(const T* q, const C* k_pages, const C* v_pages, const int32_t* table,
                            const int32_t* query_start, const int32_t* kv_len, T* o, float* lse,
                            const VarlenAttnShape& a) {
  detail::check_kv_storage<C>(a.kv, "varlen attention");
  check_metadata(table, query_start, kv_len, a);
  // The sequence of each token, so that work splits by (token, head) whatever the lengths.
  std::vector<int32_t> seq_of(static_cast<std::size_t>(a.tokens));
  for (int64_t s = 0; s < a.seqs; ++s)
    std::fill(seq_of.begin() + query_start[s], seq_of.begin() + query_start[s + 1], static_cast<int32_t>(s));
  const int64_t d = a.head_dim;
  const float scale = a.scale();
  parallel_for(a.tokens * a.heads, 1, [&](int64_t t0, int64_t t1) {
    float* qf = thread_scratch(0, static_cast<std::size_t>(d));
    float* kf = thread_scratch(1, static_cast<std::size_t>(d));
    float* vf = thread_scratch(2, static_cast<std::size_t>(d));
    float* acc = thread_scratch(3, static_cast<std::size_t>(d));
    float* scores = thread_scratch(4, static_cast<std::size_t>(key_block));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t token = t / a.heads, h = t % a.heads, kh = h / a.group();
      const int64_t s = seq_of[static_cast<std::size_t>(token)];
      const int64_t q_len = query_start[s + 1] - query_start[s];
      const int64_t visible = kv_len[s] - q_len + (token - query_start[s]) + 1;  // ≥ 1: q_len ≤ kv_len
      // ALiBi: the query sits at position visible − 1 (core/graph/alibi.hpp).
      const double slope = a.alibi_heads > 0 ? alibi_slope(h, a.alibi_heads) : 0.0;
      auto key_row = [&](const C* pages, int64_t j) {
        return pages + (a.paged.row(table, s, j) * a.kv_heads + kh) * d;
      };
      detail::load_rows(q + (token * a.heads + h) * d, d, 1, d, qf);
      std::fill(acc, acc + d, 0.0f);
      float mx = neg_inf, den = 0;
      for (int64_t j0 = 0; j0 < visible; j0 += key_block) {
        const int64_t n = std::min(key_block, visible - j0);
        float m_new = mx;
        for (int64_t c = 0; c < n; ++c) {
          detail::load_kv_row(key_row(k_pages, j0 + c), d, a.kv.scale, kf);
          scores[c] = dot(qf, kf, d) * scale;
          if (slope != 0) scores[c] += static_cast<float>(alibi_bias(slope, visible - 1, j0 + c));
          m_new = std::max(m_new, scores[c]);
        }
        const float corr = std::exp(mx - m_new);  // exp(−inf) = 0 on the first block
        for (int64_t x = 0; x < d; ++x) acc[x] *= corr;
        float sum = 0;
        for (int64_t c = 0; c < n; ++c) {
          const float pr = std::exp(scores[c] - m_new);
          sum += pr;
          detail::load_kv_row(key_row(v_pages, j0 + c), d, a.kv.scale, vf);
          axpy(pr, vf, acc, d);
        }
        den = den * corr + sum;
        mx = m_new;
      }
      const float inv = 1.0f / den;
      for (int64_t x = 0; x < d; ++x) acc[x] *= inv;
      detail::store_rows(acc, 1, d, o + (token * a.heads + h) * d, d);
      lse[h * a.tokens + token] = mx + std::log(den);
    }
  });
}

template <class T, class C>
void kv_append_slots(const T* k_new, C* pages, const int32_t* slots, int64_t tokens, int64_t row,
                     int64_t pool_rows, const KvStorage& kv) {
  detail::check_kv_storage<C>(kv, "varlen kv_append");
  for (int64_t t = 0; t < tokens; ++t)
    if (slots[t] < -1 || slots[t] >= pool_rows)
      throw std::out_of_range(fmt::format("varlen kv_append: token {} has slot {}, outside the {} rows of the pool",
                                          t, slots[t], pool_rows));
  for (int64_t t = 0; t < tokens; ++t)
    if (slots[t] >= 0)
      detail::store_kv_row(k_new + t * row, row, kv.scale, pages + int64_t{slots[t]} * row);
}

template <class T>
void gather_rows(const T* x, const int32_t* rows, T* y, int64_t n, int64_t x_rows, int64_t cols) {
  for (int64_t i = 0; i < n; ++i)
    if (rows[i] < 0 || rows[i] >= x_rows)
      throw std::out_of_range(fmt::format("varlen slice_last_token: row {} asks for row {} of {}", i, rows[i], x_rows));
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(y + i * cols, x + int64_t{rows[i]} * cols, static_cast<std::size_t>(cols) * sizeof(T));
}

#define PERFSIM_INSTANTIATE_VARLEN_KV(T, C)                                                                \
  template void varlen_flash_attention<T, C>(const T*, const C*, const C*, const int32_t*, const int32_t*, \
                                             const int32_t*, T*, float*, const VarlenAttnShape&);          \
  template void kv_append_slots<T, C>(const T*, C*, const int32_t*, int64_t, int64_t, int64_t, const KvStorage&);
PERFSIM_CPU_INSTANTIATE_KV(PERFSIM_INSTANTIATE_VARLEN_KV)

#define PERFSIM_INSTANTIATE_VARLEN(T) \
  template void gather_rows<T>(const T*, const int32_t*, T*, int64_t, int64_t, int64_t);
PERFSIM_CPU_INSTANTIATE(PERFSIM_INSTANTIATE_VARLEN)

}  // namespace perfsim::cpu
