// The CPU backend's thread pool, and kernels at sizes large enough to be split across it
// (the other kernel tests are small and mostly run inline): results must not depend on
// how work is divided.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/common/parallel.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim::cpu;
using namespace perfsim::cpu::test;

TEST_CASE("cpu parallel_for: covers every index once, nests inline, rethrows") {
  CHECK(thread_count() >= 1);
  std::vector<std::atomic<int>> hits(100000);
  parallel_for(100000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
  });
  int wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);

  std::atomic<int64_t> total{0};
  parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(100, 1, [&](int64_t b2, int64_t e2) { total.fetch_add(e2 - b2); });
  });
  CHECK(total.load() == 6400);

  CHECK_THROWS_WITH_AS(parallel_for(1000, 1, [](int64_t, int64_t e) {
                         if (e > 500) throw std::runtime_error("chunk failed");
                       }),
                       "chunk failed", std::runtime_error);
  // The pool still works after a failure.
  std::atomic<int64_t> after{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) { after.fetch_add(e - b); });
  CHECK(after.load() == 1000);
}

TEST_CASE("cpu kernels split across threads match the single-chunk reference") {
  // rmsnorm over 512 rows runs in chunks of 64 rows; compare with one row at a time.
  const int64_t rows = 512, cols = 256;
  const auto n = static_cast<std::size_t>(rows * cols);
  const auto x = random_vec(n, 1), g = random_vec(static_cast<std::size_t>(cols), 2), dy = random_vec(n, 3);
  std::vector<float> y(n), y1(n), dx(n), dg(static_cast<std::size_t>(cols)), dx1(n), dg1(static_cast<std::size_t>(cols));
  rmsnorm(x.data(), g.data(), y.data(), rows, cols, 1e-5f);
  rmsnorm_bwd(x.data(), g.data(), dy.data(), dx.data(), dg.data(), rows, cols, 1e-5f);
  std::vector<double> dg_sum(static_cast<std::size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const auto o = static_cast<std::size_t>(r * cols);
    rmsnorm(x.data() + o, g.data(), y1.data() + o, 1, cols, 1e-5f);
    rmsnorm_bwd(x.data() + o, g.data(), dy.data() + o, dx1.data() + o, dg1.data(), 1, cols, 1e-5f);
    for (std::size_t c = 0; c < dg_sum.size(); ++c) dg_sum[c] += dg1[c];
  }
  CHECK(y == y1);
  CHECK(dx == dx1);
  CHECK(rel_err(dg, dg_sum) < 1e-5);

  // 100k elements: several 32k-element chunks.
  const auto a = random_vec(100000, 4), b = random_vec(100000, 5);
  std::vector<bf16> as = to_storage<bf16>(a), bs = to_storage<bf16>(b), out(100000);
  silu_mul(as.data(), bs.data(), out.data(), 100000);
  std::vector<double> want(100000);
  const auto ar = rounded<bf16>(a), br = rounded<bf16>(b);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = double(ar[i]) / (1 + std::exp(-double(ar[i]))) * br[i];
  CHECK(rel_err(to_floats(out), want) < 1e-2);

  // Materialized bf16 attention (row-parallel loops) against flash (tile-parallel).
  AttnShape s;
  s.batch = 2, s.seq_q = 64, s.seq_kv = 64, s.heads = 8, s.kv_heads = 2, s.head_dim = 32;
  s.kv_capacity = 64, s.grad_capacity = 64, s.causal = true;
  const auto q = to_storage<bf16>(random_vec(2 * 64 * 8 * 32, 6));
  const auto k = to_storage<bf16>(random_vec(2 * 64 * 2 * 32, 7));
  const auto v = to_storage<bf16>(random_vec(2 * 64 * 2 * 32, 8));
  std::vector<bf16> sc(2 * 8 * 64 * 64), p(sc.size()), o(q.size()), fo(q.size());
  std::vector<float> lse(2 * 8 * 64);
  attn_scores(q.data(), k.data(), sc.data(), s);
  attn_softmax(sc.data(), p.data(), s);
  attn_context(p.data(), v.data(), o.data(), s);
  flash_attention(q.data(), k.data(), v.data(), fo.data(), lse.data(), s, 16);
  CHECK(rel_err(to_floats(fo), to_floats(o)) < 2e-2);
}
