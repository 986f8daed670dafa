// CPU GEMM against a naive triple loop: transposes, batches, broadcast operands,
// accumulation, and bf16/fp16 storages through the blocked conversion path.
#include <doctest/doctest.h>

#include "backends/cpu/cpu_kernels.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim::cpu;
using namespace perfsim::cpu::test;

namespace {

// C[b] (+)= op(A[b])·op(B[b]) in double; A, B hold rounded values already.
std::vector<double> ref_gemm(const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<float>& c0, const GemmShape& s) {
  std::vector<double> c(static_cast<std::size_t>(s.batch * s.m * s.n));
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    const float* ab = a.data() + (s.broadcast_a ? 0 : bi * s.m * s.k);
    const float* bb = b.data() + (s.broadcast_b ? 0 : bi * s.k * s.n);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = s.accumulate ? c0[static_cast<std::size_t>((bi * s.m + i) * s.n + j)] : 0.0;
        for (int64_t kk = 0; kk < s.k; ++kk) {
          const double av = s.trans_a ? ab[kk * s.m + i] : ab[i * s.k + kk];
          const double bv = s.trans_b ? bb[j * s.k + kk] : bb[kk * s.n + j];
          acc += av * bv;
        }
        c[static_cast<std::size_t>((bi * s.m + i) * s.n + j)] = acc;
      }
  }
  return c;
}

Storage storage_for(float) { return Storage::f32; }
Storage storage_for(bf16) { return Storage::bf16; }
Storage storage_for(half) { return Storage::f16; }

// Runs gemm with storages TA, TB, TC and returns the normalized error against the reference.
template <class TA, class TB, class TC>
double gemm_error(const GemmShape& s, uint64_t seed) {
  const std::size_t na = static_cast<std::size_t>((s.broadcast_a ? 1 : s.batch) * s.m * s.k);
  const std::size_t nb = static_cast<std::size_t>((s.broadcast_b ? 1 : s.batch) * s.k * s.n);
  const std::size_t nc = static_cast<std::size_t>(s.batch * s.m * s.n);
  auto a = to_storage<TA>(random_vec(na, seed));
  auto b = to_storage<TB>(random_vec(nb, seed + 1));
  auto c = to_storage<TC>(random_vec(nc, seed + 2));
  const std::vector<float> c0 = to_floats(c);
  const auto want = ref_gemm(to_floats(a), to_floats(b), c0, s);
  std::vector<float> ws(static_cast<std::size_t>(
      gemm_workspace_floats(s, storage_for(TA{}), storage_for(TB{}), storage_for(TC{}))));
  gemm(a.data(), storage_for(TA{}), b.data(), storage_for(TB{}), c.data(), storage_for(TC{}), s,
       ws.data());
  return rel_err(to_floats(c), want);
}

}  // namespace

TEST_CASE("cpu gemm: fp32 matches the naive product for every transpose combination") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        GemmShape s;
        s.m = 7, s.n = 5, s.k = 9;
        s.trans_a = ta, s.trans_b = tb, s.accumulate = acc;
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(acc);
        CHECK(gemm_error<float, float, float>(s, 11) < 1e-5);
      }
}

TEST_CASE("cpu gemm: fp32 needs no workspace; 16-bit operands a bounded one") {
  GemmShape s;
  s.m = 4096, s.n = 4096, s.k = 4096;
  CHECK(gemm_workspace_floats(s, Storage::f32, Storage::f32, Storage::f32) == 0);
  // 256x512 A block + 512x512 B block + 256x512 C block, whatever the problem size.
  CHECK(gemm_workspace_floats(s, Storage::bf16, Storage::bf16, Storage::bf16) ==
        256 * 512 + 512 * 512 + 256 * 512);
  s.m = 30, s.n = 5, s.k = 7;
  CHECK(gemm_workspace_floats(s, Storage::f32, Storage::bf16, Storage::f32) == 30 * 7 + 7 * 5 + 30 * 5);
}

TEST_CASE("cpu gemm: batched, with broadcast operands") {
  GemmShape s;
  s.batch = 3, s.m = 6, s.n = 4, s.k = 5;
  CHECK(gemm_error<float, float, float>(s, 21) < 1e-5);
  s.broadcast_b = true;
  CHECK(gemm_error<float, float, float>(s, 22) < 1e-5);
  s.broadcast_b = false;
  s.broadcast_a = true;
  s.trans_a = true;
  CHECK(gemm_error<float, float, float>(s, 23) < 1e-5);
  s.broadcast_a = false;
  CHECK(gemm_error<bf16, bf16, bf16>(s, 24) < 1e-2);
}

TEST_CASE("cpu gemm: bf16 and fp16 storages, mixed with fp32") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      GemmShape s;
      s.m = 37, s.n = 45, s.k = 29;
      s.trans_a = ta, s.trans_b = tb;
      CAPTURE(ta);
      CAPTURE(tb);
      CHECK(gemm_error<bf16, bf16, bf16>(s, 31) < 1e-2);
      CHECK(gemm_error<half, half, half>(s, 32) < 1e-2);
      // fp32 output of 16-bit inputs is exact up to fp32 accumulation.
      CHECK(gemm_error<bf16, float, float>(s, 33) < 1e-5);
      CHECK(gemm_error<float, half, float>(s, 34) < 1e-5);
      s.accumulate = true;
      CHECK(gemm_error<bf16, bf16, bf16>(s, 35) < 1e-2);
      CHECK(gemm_error<bf16, bf16, float>(s, 36) < 1e-5);
    }
}

TEST_CASE("cpu gemm: bf16 across several conversion blocks in every dimension") {
  GemmShape s;
  s.m = 261, s.n = 517, s.k = 515;  // just over one 256x512x512 block each
  s.trans_b = true;
  CHECK(gemm_error<bf16, bf16, float>(s, 41) < 1e-5);
  s.trans_b = false;
  s.accumulate = true;
  CHECK(gemm_error<float, bf16, bf16>(s, 42) < 1e-2);
}

TEST_CASE("cpu gemm: decode-shaped products stream a 16-bit B once") {
  for (int64_t m : {1, 3, 8})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        GemmShape s;
        s.m = m, s.n = 600, s.k = 70;  // several 256-column blocks, a ragged last one
        s.trans_b = tb, s.accumulate = acc;
        CAPTURE(m);
        CAPTURE(tb);
        CAPTURE(acc);
        CHECK(gemm_workspace_floats(s, Storage::bf16, Storage::bf16, Storage::bf16) == m * 70);
        CHECK(gemm_error<bf16, bf16, bf16>(s, 51) < 1e-2);
        CHECK(gemm_error<float, bf16, float>(s, 52) < 1e-5);
        CHECK(gemm_error<half, half, float>(s, 53) < 1e-5);
      }
  GemmShape s;
  s.m = 2, s.n = 9, s.k = 5, s.batch = 3, s.trans_a = true, s.broadcast_b = true;
  CHECK(gemm_error<bf16, bf16, bf16>(s, 54) < 1e-2);
}
