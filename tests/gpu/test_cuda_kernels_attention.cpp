// CUDA materialized attention (scores, softmax, context and their backward passes) against
// the CPU reference on the same inputs: GQA, causal and not, odd lengths, a KV capacity larger
// than the valid rows, gradient capacity rows that must be zeroed, and a one-token decode. The
// products run through cuBLAS; both of its batching schedules (per (batch, group member) and
// per query head) are exercised.
#include <doctest/doctest.h>

#include <algorithm>

#include "backends/cuda/cuda_blas.hpp"
#include "backends/cuda/kernels/attention_materialized.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

template <class D>
void check_attention(const ops::AttnShape& a) {
  using H = host_t<D>;
  const int64_t q_n = a.batch * a.seq_q * a.heads * a.head_dim;
  const int64_t kv_n = a.batch * a.kv_capacity * a.kv_heads * a.head_dim;
  const int64_t g_n = a.batch * a.grad_capacity * a.kv_heads * a.head_dim;
  const int64_t s_n = a.batch * a.heads * a.seq_q * a.seq_kv;
  const auto q = random_values<H>(q_n, 101, -2, 2);
  const auto k = random_values<H>(kv_n, 102, -2, 2);
  const auto v = random_values<H>(kv_n, 103);
  const auto d_o = random_values<H>(q_n, 104);
  const auto s_in = random_values<H>(s_n, 105, -4, 4);
  const auto dp_in = random_values<H>(s_n, 106);
  // A valid probability tensor (rows sum to 1, masked entries 0) as input of the P-consuming ops.
  std::vector<H> p(static_cast<size_t>(s_n));
  cpu::attn_softmax(s_in.data(), p.data(), a);

  DeviceBuffer<D> dq_in(q), dk_in(k), dv_in(v), ddo(d_o), ds_in(s_in), ddp_in(dp_in), dp_prob(p);
  DeviceBuffer<D> out_s(s_n), out_q(q_n), out_kv(g_n);
  std::vector<H> want_s(static_cast<size_t>(s_n)), want_q(static_cast<size_t>(q_n)), want_kv(static_cast<size_t>(g_n));

  static cuda::BlasHandle handle;
  DeviceBuffer<float> grad_ws(std::max<int64_t>(1, cuda::attn_grad_workspace_bytes(a, sizeof(D)) / 4));
  grad_ws.poison();
  const cuda::AttnGemm blas{handle.handle(), handle.workspace(), cuda::BlasHandle::workspace_bytes, false, grad_ws.get()};

  out_s.poison();
  cuda::attn_scores(dq_in.get(), dk_in.get(), out_s.get(), a, blas, nullptr);
  cpu::attn_scores(q.data(), k.data(), want_s.data(), a);
  CHECK(normalized_error(out_s.download(), want_s) <= tolerance<D>());

  out_s.poison();
  cuda::attn_softmax(ds_in.get(), out_s.get(), a, nullptr);
  CHECK(normalized_error(out_s.download(), p) <= tolerance<D>());

  out_q.poison();
  cuda::attn_context(dp_prob.get(), dv_in.get(), out_q.get(), a, blas, nullptr);
  cpu::attn_context(p.data(), v.data(), want_q.data(), a);
  CHECK(normalized_error(out_q.download(), want_q) <= tolerance<D>());

  out_s.poison();
  out_kv.poison();
  cuda::attn_context_bwd(ddo.get(), dp_prob.get(), dv_in.get(), out_s.get(), out_kv.get(), a, blas, nullptr);
  cpu::attn_context_bwd(d_o.data(), p.data(), v.data(), want_s.data(), want_kv.data(), a);
  CHECK(normalized_error(out_s.download(), want_s) <= tolerance<D>());
  CHECK(normalized_error(out_kv.download(), want_kv) <= tolerance<D>());

  out_s.poison();
  cuda::attn_softmax_bwd(dp_prob.get(), ddp_in.get(), out_s.get(), a, nullptr);
  cpu::attn_softmax_bwd(p.data(), dp_in.data(), want_s.data(), a);
  CHECK(normalized_error(out_s.download(), want_s) <= tolerance<D>());

  out_q.poison();
  out_kv.poison();
  cuda::attn_scores_bwd(ddp_in.get(), dq_in.get(), dk_in.get(), out_q.get(), out_kv.get(), a, blas, nullptr);
  cpu::attn_scores_bwd(dp_in.data(), q.data(), k.data(), want_q.data(), want_kv.data(), a);
  CHECK(normalized_error(out_q.download(), want_q) <= tolerance<D>());
  CHECK(normalized_error(out_kv.download(), want_kv) <= tolerance<D>());
}

}  // namespace

TEST_CASE_TEMPLATE("cuda kernels: materialized attention matches the CPU reference", D, float,
                   __nv_bfloat16, __half) {
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    SUBCASE("GQA, odd lengths, spare capacity") {
      check_attention<D>({.batch = 2, .seq_q = 13, .seq_kv = 21, .heads = 4, .kv_heads = 2,
                          .head_dim = 40, .kv_capacity = 24, .grad_capacity = 23, .causal = causal});
    }
    SUBCASE("square, vector path") {
      check_attention<D>({.batch = 1, .seq_q = 64, .seq_kv = 64, .heads = 2, .kv_heads = 2,
                          .head_dim = 64, .kv_capacity = 64, .grad_capacity = 64, .causal = causal});
    }
    SUBCASE("long rows: one block per softmax row") {
      check_attention<D>({.batch = 1, .seq_q = 5, .seq_kv = 3000, .heads = 2, .kv_heads = 1,
                          .head_dim = 32, .kv_capacity = 3000, .grad_capacity = 3000, .causal = causal});
    }
    SUBCASE("very long rows: two-sweep softmax") {
      check_attention<D>({.batch = 1, .seq_q = 2, .seq_kv = 40000, .heads = 1, .kv_heads = 1,
                          .head_dim = 16, .kv_capacity = 40000, .grad_capacity = 40000, .causal = causal});
    }
    SUBCASE("GQA, batch·group > heads: one call per query head") {
      check_attention<D>({.batch = 3, .seq_q = 9, .seq_kv = 11, .heads = 4, .kv_heads = 2,
                          .head_dim = 24, .kv_capacity = 16, .grad_capacity = 12, .causal = causal});
    }
    SUBCASE("one-token decode, GQA 4") {
      check_attention<D>({.batch = 2, .seq_q = 1, .seq_kv = 37, .heads = 8, .kv_heads = 2,
                          .head_dim = 32, .kv_capacity = 48, .grad_capacity = 37, .causal = causal});
    }
  }
}

// The softmax alone on every row kernel: one warp per row (1 to 8 packs per lane: 16-bit rows
// of 600, 768, 1280, 1500 and 1700 take 3, 3, 5, 6 and 7), one block per row, and a causal
// mask ending inside a pack (seq_kv 1000: the last visible element of a row is mid-pack).
TEST_CASE_TEMPLATE("cuda kernels: attention softmax matches the CPU reference on every row kernel", D,
                   float, __nv_bfloat16, __half) {
  using H = host_t<D>;
  for (const int64_t skv : {int64_t{33}, int64_t{256}, int64_t{600}, int64_t{768}, int64_t{1000}, int64_t{1024},
                            int64_t{1280}, int64_t{1500}, int64_t{1700}, int64_t{2048}, int64_t{4100}}) {
    for (const bool causal : {false, true}) {
      CAPTURE(skv);
      CAPTURE(causal);
      const ops::AttnShape a{.batch = 2, .seq_q = 7, .seq_kv = skv, .heads = 3, .kv_heads = 3,
                             .head_dim = 8, .kv_capacity = skv, .grad_capacity = skv, .causal = causal};
      const int64_t n = a.batch * a.heads * a.seq_q * skv;
      const auto s_in = random_values<H>(n, 107, -6, 6);
      std::vector<H> want(static_cast<size_t>(n));
      cpu::attn_softmax(s_in.data(), want.data(), a);
      DeviceBuffer<D> d_s(s_in), d_p(n);
      d_p.poison();
      cuda::attn_softmax(d_s.get(), d_p.get(), a, nullptr);
      CHECK(normalized_error(d_p.download(), want) <= tolerance<D>());
    }
  }
}
