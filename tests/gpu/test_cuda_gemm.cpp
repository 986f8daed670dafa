// cuBLASLt GEMMs (backends/cuda/cuda_gemm.hpp) against cpu::gemm on the same inputs: every
// precision, odd sizes, both transposes, accumulation, batched and broadcast operands; fp8
// against a CPU reference on inputs quantized to e4m3 first; the device fp8 quantizer
// against the host one.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "approx.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "gpu_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::cuda;
using namespace perfsim::cuda::test;

namespace {

std::size_t a_elems(const ops::GemmShape& s) { return static_cast<std::size_t>((s.broadcast_a ? 1 : s.batch) * s.m * s.k); }
std::size_t b_elems(const ops::GemmShape& s) { return static_cast<std::size_t>((s.broadcast_b ? 1 : s.batch) * s.k * s.n); }
std::size_t c_elems(const ops::GemmShape& s) { return static_cast<std::size_t>(s.batch * s.m * s.n); }

// The CPU result for float inputs (already rounded to the storage the GPU sees).
std::vector<float> cpu_gemm(const std::vector<float>& a, const std::vector<float>& b, std::vector<float> c,
                            const ops::GemmShape& s) {
  cpu::gemm(a.data(), host::Storage::f32, b.data(), host::Storage::f32, c.data(), host::Storage::f32, s, nullptr);
  return c;
}

// Runs one GEMM with inputs in storage T (float, bf16 or half) and C in TC; returns C as float.
template <class T, class TC>
std::vector<float> gpu_gemm(GemmEngine& e, const std::vector<float>& a, const std::vector<float>& b,
                            const std::vector<float>& c0, const ops::GemmShape& s, Elem t, Elem tc, bool tf32) {
  const DeviceBuffer da = to_device(to_storage<T>(a)), db = to_device(to_storage<T>(b));
  DeviceBuffer dc = s.accumulate ? to_device(to_storage<TC>(c0)) : poisoned<TC>(c_elems(s));
  e.gemm({da.get(), t}, {db.get(), t}, dc.get(), tc, s, tf32, nullptr);
  return to_floats(from_device<TC>(dc, c_elems(s)));
}

std::string describe(const ops::GemmShape& s) {
  return "batch " + std::to_string(s.batch) + " m " + std::to_string(s.m) + " n " + std::to_string(s.n) + " k " +
         std::to_string(s.k) + (s.trans_a ? " trans_a" : "") + (s.trans_b ? " trans_b" : "") +
         (s.accumulate ? " accumulate" : "") + (s.broadcast_a ? " broadcast_a" : "") + (s.broadcast_b ? " broadcast_b" : "");
}

std::vector<ops::GemmShape> shapes() {
  std::vector<ops::GemmShape> out;
  auto add = [&](int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc, bool ba, bool bb) {
    ops::GemmShape s;
    s.batch = batch, s.m = m, s.n = n, s.k = k, s.trans_a = ta, s.trans_b = tb, s.accumulate = acc;
    s.broadcast_a = ba, s.broadcast_b = bb;
    out.push_back(s);
  };
  add(1, 7, 1000, 33, false, false, false, false, false);  // odd sizes
  add(1, 64, 48, 96, true, false, false, false, false);    // A transposed (weight gradient)
  add(1, 33, 17, 65, false, true, false, false, false);    // B transposed (input gradient)
  add(1, 31, 29, 45, true, true, true, false, false);      // both, accumulating
  add(3, 9, 40, 24, false, false, false, false, false);    // batched
  add(4, 5, 24, 16, false, false, true, false, true);      // batched, B shared, accumulating
  add(2, 12, 8, 32, false, true, false, true, false);      // batched, A shared
  return out;
}

}  // namespace

TEST_CASE("cuda gemm: fp32 and tf32 match cpu::gemm") {
  GemmEngine e;
  for (const ops::GemmShape& s : shapes()) {
    INFO(describe(s));
    const auto a = random_vec(a_elems(s), 1), b = random_vec(b_elems(s), 2), c0 = random_vec(c_elems(s), 3);
    const auto want = cpu_gemm(a, b, c0, s);
    // fp32: only the summation order differs from OpenBLAS.
    CHECK(rel_err(gpu_gemm<float, float>(e, a, b, c0, s, Elem::f32, Elem::f32, false), want) < 1e-5);
    // tf32 rounds inputs to 10 mantissa bits (relative 2^-11 each): ~1e-3 on a dot product.
    CHECK(rel_err(gpu_gemm<float, float>(e, a, b, c0, s, Elem::f32, Elem::f32, true), want) < 5e-3);
  }
}

TEST_CASE("cuda gemm: bf16 and fp16 accumulate in fp32") {
  GemmEngine e;
  for (const ops::GemmShape& s : shapes()) {
    INFO(describe(s));
    const auto a = random_vec(a_elems(s), 4), b = random_vec(b_elems(s), 5), c0 = random_vec(c_elems(s), 6);
    {
      const auto want = cpu_gemm(rounded<host::bf16>(a), rounded<host::bf16>(b), rounded<host::bf16>(c0), s);
      CHECK(rel_err(gpu_gemm<host::bf16, host::bf16>(e, a, b, c0, s, Elem::bf16, Elem::bf16, false), want) < 1e-2);
      // bf16 inputs, fp32 output: only fp32 rounding differs.
      const auto want32 = cpu_gemm(rounded<host::bf16>(a), rounded<host::bf16>(b), c0, s);
      CHECK(rel_err(gpu_gemm<host::bf16, float>(e, a, b, c0, s, Elem::bf16, Elem::f32, false), want32) < 1e-5);
    }
    const auto want = cpu_gemm(rounded<host::half>(a), rounded<host::half>(b), rounded<host::half>(c0), s);
    CHECK(rel_err(gpu_gemm<host::half, host::half>(e, a, b, c0, s, Elem::f16, Elem::f16, false), want) < 1e-2);
  }
}

TEST_CASE("cuda gemm: plans are cached per shape") {
  GemmEngine e;
  ops::GemmShape s;
  s.m = 8, s.n = 16, s.k = 32;
  const auto a = random_vec(8 * 32, 1), b = random_vec(32 * 16, 2);
  (void)gpu_gemm<float, float>(e, a, b, {}, s, Elem::f32, Elem::f32, false);
  (void)gpu_gemm<float, float>(e, a, b, {}, s, Elem::f32, Elem::f32, false);
  CHECK(e.cached_plans() == 1);
  (void)gpu_gemm<float, float>(e, a, b, {}, s, Elem::f32, Elem::f32, true);
  CHECK(e.cached_plans() == 2);
}

namespace {

// Host e4m3 quantization with the per-tensor scale amax / 448 (the device recipe).
struct Quantized {
  std::vector<unsigned char> q;
  float scale = 1;
  std::vector<float> dequantized;
};

Quantized quantize_host(const std::vector<float>& x) {
  Quantized out;
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::abs(v));
  out.scale = amax > 0 ? amax / e4m3_max : 1.0f;
  const float inv = 1.0f / out.scale;  // multiply by the reciprocal, as the device does
  for (float v : x) {
    const __nv_fp8_e4m3 q(v * inv);
    out.q.push_back(q.__x);
    out.dequantized.push_back(static_cast<float>(q) * out.scale);
  }
  return out;
}

// x [rows, cols] -> [cols, rows]
std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<std::size_t>(c * rows + r)] = x[static_cast<std::size_t>(r * cols + c)];
  return t;
}

}  // namespace

TEST_CASE("cuda gemm: fp8 e4m3 (TN) matches a CPU gemm on e4m3-quantized inputs") {
  GemmEngine e;
  for (const auto [m, n, k, acc] : {std::tuple{7, 32, 64, false}, std::tuple{64, 128, 96, true}, std::tuple{33, 48, 272, false}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    ops::GemmShape s;
    s.m = m, s.n = n, s.k = k, s.trans_b = true, s.accumulate = acc;
    const auto a = random_vec(static_cast<std::size_t>(m * k), 7);
    const auto b = random_vec(static_cast<std::size_t>(n * k), 8, 0.05f);  // stored [n, k]
    const auto c0 = random_vec(static_cast<std::size_t>(m * n), 9);
    const Quantized qa = quantize_host(a), qb = quantize_host(b);
    const auto want = cpu_gemm(qa.dequantized, qb.dequantized, rounded<host::bf16>(c0), s);
    const DeviceBuffer da = to_device(qa.q), db = to_device(qb.q);
    const DeviceBuffer sa = to_device(std::vector<float>{qa.scale}), sb = to_device(std::vector<float>{qb.scale});
    DeviceBuffer dc = acc ? to_device(to_storage<host::bf16>(c0)) : poisoned<host::bf16>(static_cast<std::size_t>(m * n));
    e.gemm({da.get(), Elem::e4m3, sa.as<float>()}, {db.get(), Elem::e4m3, sb.as<float>()}, dc.get(), Elem::bf16, s,
           false, nullptr);
    // Exact products of e4m3 values summed in fp32; the bf16 output rounds (2^-9).
    CHECK(rel_err(to_floats(from_device<host::bf16>(dc, static_cast<std::size_t>(m * n))), want) < 1e-2);
  }
  // Layouts other than TN are refused with the reason.
  ops::GemmShape nn;
  nn.m = 16, nn.n = 16, nn.k = 16;
  CHECK(GemmEngine::unsupported(Elem::e4m3, Elem::e4m3, Elem::bf16, nn).find("TN") != std::string::npos);
}

TEST_CASE("cuda gemm: the device fp8 quantizer matches the host recipe, transposed or not") {
  const int64_t batch = 2, rows = 37, cols = 48;
  const auto x = random_vec(static_cast<std::size_t>(batch * rows * cols), 11, 3.0f);
  const Quantized want = quantize_host(x);
  const DeviceBuffer dx = to_device(to_storage<float>(x));
  for (bool transpose : {false, true}) {
    CAPTURE(transpose);
    DeviceBuffer q = poisoned<unsigned char>(x.size()), scale = poisoned<float>(1), amax(sizeof(float));
    quantize_e4m3(dx.get(), Elem::f32, q.as<uint8_t>(), scale.as<float>(), amax.as<float>(), batch, rows, cols,
                  transpose, nullptr);
    const auto got = from_device<unsigned char>(q, x.size());
    CHECK(from_device<float>(scale, 1)[0] == approx(want.scale).epsilon(1e-6));
    std::vector<float> expect_q(want.q.begin(), want.q.end()), got_q(got.begin(), got.end());
    if (transpose) {
      std::vector<float> t;
      for (int64_t b = 0; b < batch; ++b) {
        const std::vector<float> slice(expect_q.begin() + b * rows * cols, expect_q.begin() + (b + 1) * rows * cols);
        const auto ts = transposed(slice, rows, cols);
        t.insert(t.end(), ts.begin(), ts.end());
      }
      expect_q = t;
    }
    CHECK(got_q == expect_q);  // identical bytes: same scale, same rounding
  }
}
