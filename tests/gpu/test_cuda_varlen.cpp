// CUDA kernels of a serving engine's packed step (the varlen kinds) against the CPU reference
// (cpu_varlen.cpp, cpu::rope_at) on the same random inputs: varlen paged attention with decodes
// (splits merged in a cluster or through a workspace, or unsplit) and prefill chunks after cached
// keys in one call, pages shuffled in the pool and unused table entries −1; rope at per-token
// positions; the KV append through page slots; the row gather. Outputs are poisoned with NaN
// bytes so an unwritten element fails. Attention tolerances (normalized max error) as
// test_cuda_flash_attention.cpp: 16-bit ≤ 1e-2 (the tensor-core path rounds P to 16 bits before
// P·V), fp32 ≤ 1e-4; LSE within 1e-3.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/kernels/memory_ops.cuh"
#include "backends/cuda/kernels/pointwise.cuh"
#include "backends/cuda/kernels/varlen_attention.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

template <class D> double attn_tolerance() { return std::is_same_v<D, float> ? 1e-4 : 1e-2; }

// A step's metadata: sequences (q_len, kv_len), the first `decodes` of them single queries.
struct Step {
  ops::VarlenAttnShape a;
  std::vector<int32_t> table, query_start, kv_len;
};

Step make_step(const std::vector<std::pair<int, int>>& seqs, int64_t decodes, int64_t heads, int64_t kv_heads,
               int64_t head_dim, int64_t block, uint32_t seed) {
  Step st;
  ops::VarlenAttnShape& a = st.a;
  a.seqs = static_cast<int64_t>(seqs.size());
  a.heads = heads, a.kv_heads = kv_heads, a.head_dim = head_dim;
  a.decode_seqs = decodes;
  a.paged.block = block;
  int64_t used_pages = 0;
  st.query_start.push_back(0);
  for (const auto& [q_len, kv] : seqs) {
    st.query_start.push_back(st.query_start.back() + q_len);
    st.kv_len.push_back(kv);
    a.max_q = std::max<int64_t>(a.max_q, q_len);
    a.max_kv = std::max<int64_t>(a.max_kv, kv);
    a.paged.max_blocks = std::max<int64_t>(a.paged.max_blocks, (kv + block - 1) / block);
    used_pages += (kv + block - 1) / block;
  }
  a.tokens = st.query_start.back();
  a.paged.num_blocks = used_pages + 3;  // spare pages hold random rows no sequence owns
  // Shuffled pages; entries past a sequence's keys are −1, so reading one would fault.
  std::vector<int32_t> pages(static_cast<size_t>(a.paged.num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(seed));
  st.table.assign(static_cast<size_t>(a.seqs * a.paged.max_blocks), -1);
  size_t next = 0;
  for (int64_t s = 0; s < a.seqs; ++s)
    for (int64_t b = 0; b * block < st.kv_len[static_cast<size_t>(s)]; ++b)
      st.table[static_cast<size_t>(s * a.paged.max_blocks + b)] = pages[next++];
  return st;
}

// LSE: within `tol` absolute (fp32 either way); NaN or an infinity fails.
double lse_err(const std::vector<float>& got, const std::vector<float>& want) {
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    e = std::max(e, double(std::abs(got[i] - want[i])));
  }
  return e;
}

// Normalized O error of each sequence's rows, for the failure message.
template <class H>
std::string per_sequence_errors(const Step& st, const std::vector<H>& got, const std::vector<H>& want) {
  const int64_t row = st.a.heads * st.a.head_dim;
  std::string out;
  for (int64_t s = 0; s < st.a.seqs; ++s) {
    const auto b = static_cast<std::ptrdiff_t>(st.query_start[size_t(s)] * row);
    const auto e = static_cast<std::ptrdiff_t>(st.query_start[size_t(s) + 1] * row);
    const std::vector<H> g(got.begin() + b, got.begin() + e), w(want.begin() + b, want.begin() + e);
    out += "seq " + std::to_string(s) + " (q " + std::to_string(st.query_start[size_t(s) + 1] - st.query_start[size_t(s)]) +
           ", kv " + std::to_string(st.kv_len[size_t(s)]) + "): " + std::to_string(normalized_error(g, w)) + "; ";
  }
  return out;
}

enum class Merge { cluster, workspace };

template <class D>
void check_attention(const Step& st, uint32_t seed, Merge merge = Merge::cluster) {
  using H = host_t<D>;
  const ops::VarlenAttnShape& a = st.a;
  const int64_t q_n = a.tokens * a.heads * a.head_dim;
  const int64_t pool_n = a.paged.num_blocks * a.paged.block * a.kv_heads * a.head_dim;
  const auto q = random_values<H>(q_n, seed, -2, 2);
  const auto k = random_values<H>(pool_n, seed + 1, -2, 2);
  const auto v = random_values<H>(pool_n, seed + 2);
  std::vector<H> o_ref(static_cast<size_t>(q_n));
  std::vector<float> lse_ref(static_cast<size_t>(a.heads * a.tokens));
  cpu::varlen_flash_attention(q.data(), k.data(), v.data(), st.table.data(), st.query_start.data(), st.kv_len.data(),
                              o_ref.data(), lse_ref.data(), a);

  DeviceBuffer<D> dq(q), dk(k), dv(v), d_o(q_n);
  DeviceBuffer<int32_t> dt(st.table), dqs(st.query_start), dkv(st.kv_len);
  DeviceBuffer<float> dlse(a.heads * a.tokens);
  const int64_t ws_bytes = merge == Merge::workspace ? cuda::varlen_attention_workspace_bytes(a) : 0;
  DeviceBuffer<float> ws(std::max<int64_t>(1, ws_bytes / 4));
  d_o.poison();
  dlse.poison();
  ws.poison();
  cuda::varlen_flash_attention(dq.get(), dk.get(), dv.get(), dt.get(), dqs.get(), dkv.get(), d_o.get(), dlse.get(), a,
                               nullptr, ws_bytes > 0 ? ws.get() : nullptr, ws_bytes);
  const std::vector<H> o = d_o.download();
  const double o_err = normalized_error(o, o_ref);
  const double l_err = lse_err(dlse.download(), lse_ref);
  INFO("decode splits " << cuda::varlen_decode_splits(a) << "; " << per_sequence_errors(st, o, o_ref));
  CHECK(o_err <= attn_tolerance<D>());
  CHECK(l_err <= 1e-3);
}

// 5 decodes (contexts 1..700: one key, a page and a bit, several splits), a chunk of 200
// queries after 300 cached keys, a sequence with no query, a whole prompt of 130.
Step mixed_step(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t block = 16, uint32_t seed = 3) {
  return make_step({{1, 1}, {1, 17}, {1, 64}, {1, 333}, {1, 700}, {200, 500}, {0, 40}, {130, 130}}, 5, heads, kv_heads,
                   head_dim, block, seed);
}

template <class D>
void check_rope_at(int64_t tokens, int64_t heads, int64_t head_dim, uint32_t seed) {
  using H = host_t<D>;
  const int64_t n = tokens * heads * head_dim;
  const auto x = random_values<H>(n, seed);
  std::vector<int32_t> positions(static_cast<size_t>(tokens));
  std::mt19937 rng(seed + 1);
  for (auto& p : positions) p = std::uniform_int_distribution<int32_t>(0, 8191)(rng);
  ops::RopeShape r;
  r.tokens = tokens, r.heads = heads, r.head_dim = head_dim;
  std::vector<H> want(static_cast<size_t>(n));
  cpu::rope_at(x.data(), positions.data(), want.data(), r);
  DeviceBuffer<D> dx(x), dy(n);
  DeviceBuffer<int32_t> dp(positions);
  dy.poison();
  cuda::rope_at(dx.get(), dp.get(), dy.get(), r, nullptr);
  CHECK(normalized_error(dy.download(), want) <= tolerance<D>());
}

template <class D>
void check_kv_append_slots(int64_t tokens, int64_t row, int64_t pool_rows, uint32_t seed) {
  using H = host_t<D>;
  const auto k_new = random_values<H>(tokens * row, seed);
  auto pages = random_values<H>(pool_rows * row, seed + 1);
  // Distinct pool rows in random order; every fifth token keeps no row (−1).
  std::vector<int32_t> slots(static_cast<size_t>(pool_rows));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(seed + 2));
  slots.resize(static_cast<size_t>(tokens));
  for (size_t t = 0; t < slots.size(); t += 5) slots[t] = -1;
  DeviceBuffer<D> dk(k_new), dpages(pages);
  DeviceBuffer<int32_t> dslots(slots);
  cpu::kv_append_slots(k_new.data(), pages.data(), slots.data(), tokens, row, pool_rows);
  cuda::kv_append_slots(dk.get(), dpages.get(), dslots.get(), tokens, row, pool_rows, nullptr);
  CHECK(normalized_error(dpages.download(), pages) == 0.0);
}

template <class D>
void check_gather_rows(int64_t n, int64_t x_rows, int64_t cols, uint32_t seed) {
  using H = host_t<D>;
  const auto x = random_values<H>(x_rows * cols, seed);
  const std::vector<int32_t> rows = random_ids(n, static_cast<int32_t>(x_rows), seed + 1);
  std::vector<H> want(static_cast<size_t>(n * cols));
  cpu::gather_rows(x.data(), rows.data(), want.data(), n, x_rows, cols);
  DeviceBuffer<D> dx(x), dy(n * cols);
  DeviceBuffer<int32_t> drows(rows);
  dy.poison();
  cuda::gather_rows(dx.get(), drows.get(), dy.get(), n, x_rows, cols, nullptr);
  CHECK(normalized_error(dy.download(), want) == 0.0);
}

}  // namespace

TEST_CASE_TEMPLATE("cuda varlen attention: decodes and prefill chunks in one step match the CPU", D, __nv_bfloat16,
                   float) {
  for (const int64_t head_dim : {128, 64})
    for (const int64_t group : {4, 1}) {  // 8 heads on 2 KV heads, 4 on 4
      CAPTURE(head_dim);
      CAPTURE(group);
      const int64_t kv_heads = group == 4 ? 2 : 4;
      check_attention<D>(mixed_step(kv_heads * group, kv_heads, head_dim), 11);
      check_attention<D>(mixed_step(kv_heads * group, kv_heads, head_dim), 12, Merge::workspace);
    }
}

TEST_CASE("cuda varlen attention: fp16, GQA 8, pages of 12 rows, head_dim 96 and 32, unsplit decodes") {
  // GQA group 8 takes the decode kernel's 8-row pass; 12-row pages the division path.
  check_attention<__half>(mixed_step(16, 2, 128, 16, 5), 21);
  check_attention<__nv_bfloat16>(mixed_step(8, 2, 128, 12, 6), 22);
  check_attention<__half>(mixed_step(16, 2, 128, 12, 5), 27, Merge::workspace);
  check_attention<float>(mixed_step(8, 2, 64, 12, 7), 23);
  check_attention<__nv_bfloat16>(mixed_step(8, 2, 64, 12, 8), 28);  // 4-row runs of a 12-row page
  // head_dim 96: every sequence on the one-warp-per-row kernel; 32: the decode kernel's 4-lane rows.
  check_attention<__nv_bfloat16>(mixed_step(8, 2, 96), 24);
  check_attention<__nv_bfloat16>(mixed_step(8, 2, 32), 25);
  // Enough decodes to fill the GPU with short contexts: one CTA per (decode, kv head).
  std::vector<std::pair<int, int>> many(300, {1, 60});
  many.emplace_back(70, 100);
  const Step unsplit = make_step(many, 300, 8, 2, 128, 16, 13);
  CHECK(cuda::varlen_decode_splits(unsplit.a) == 1);
  check_attention<__nv_bfloat16>(unsplit, 26);
}

TEST_CASE("cuda varlen attention: decodes only, prefills only") {
  check_attention<__nv_bfloat16>(make_step({{1, 5}, {1, 1000}, {1, 129}}, 3, 8, 2, 128, 16, 8), 31);
  check_attention<__nv_bfloat16>(make_step({{64, 64}, {1, 300}, {65, 1000}, {3, 3}}, 0, 8, 2, 128, 16, 9), 32);
  check_attention<float>(make_step({{64, 64}, {1, 300}, {65, 1000}, {3, 3}}, 0, 8, 2, 64, 16, 10), 33);
}

TEST_CASE("cuda varlen attention: a Llama-3-8B step (32 heads, 8 KV heads, head_dim 128, bf16) runs and matches") {
  // 48 decodes with contexts up to 4000, a chunk of 512 after 1536 cached keys, a prompt of 300,
  // a single query that is not a decode.
  std::vector<std::pair<int, int>> seqs;
  std::mt19937 rng(77);
  for (int i = 0; i < 48; ++i) seqs.emplace_back(1, std::uniform_int_distribution<int>(1, 4000)(rng));
  seqs.emplace_back(512, 2048);
  seqs.emplace_back(300, 300);
  seqs.emplace_back(1, 100);
  check_attention<__nv_bfloat16>(make_step(seqs, 48, 32, 8, 128, 16, 12), 41);
  check_attention<__nv_bfloat16>(make_step(seqs, 48, 32, 8, 128, 16, 12), 42, Merge::workspace);
}

TEST_CASE_TEMPLATE("cuda varlen rope, KV append through slots and row gather match the CPU", D, __nv_bfloat16, float,
                   __half) {
  check_rope_at<D>(37, 8, 128, 51);  // 16-byte packs
  check_rope_at<D>(19, 3, 10, 52);   // pairs one by one
  check_rope_at<D>(5, 2, 7, 53);     // odd head_dim: the last element passes through
  check_kv_append_slots<D>(37, 2 * 64, 100, 54);
  check_kv_append_slots<D>(21, 6, 40, 55);  // rows not a multiple of 16 bytes
  check_gather_rows<D>(7, 50, 4096, 56);
  check_gather_rows<D>(9, 30, 5, 57);
}
