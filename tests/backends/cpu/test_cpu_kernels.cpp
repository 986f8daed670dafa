// CPU storage types and the remaining kernel families against hand values and references:
// bf16/fp16/fp8 e4m3 rounding, embedding gather and scatter-add, cross-entropy and its gradient,
// AdamW (fused == unfused, master weights), KV append, last-token slice and copies.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "approx.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim::cpu;
using perfsim::test::approx;
using namespace perfsim::cpu::test;

TEST_CASE("cpu types: bf16 rounds to nearest even") {
  CHECK(float(bf16(1.0f)) == 1.0f);
  // bf16 keeps 7 mantissa bits: the ulp at 1 is 2^-7.
  CHECK(float(bf16(1.0f + 0x1.0p-8f)) == 1.0f);                        // tie -> even (down)
  CHECK(float(bf16(1.0f + 0x1.0p-7f + 0x1.0p-8f)) == 1.0f + 0x1.0p-6f);  // tie -> even (up)
  CHECK(float(bf16(1.0f + 0x1.0p-8f + 0x1.0p-12f)) == 1.0f + 0x1.0p-7f); // above the tie
  CHECK(float(bf16(-3.0f)) == -3.0f);
  CHECK(std::isinf(float(bf16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(float(bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("cpu types: fp16 rounding, range and subnormals") {
  CHECK(float(half(1.0f)) == 1.0f);
  CHECK(float(half(1.0f + 0x1.0p-11f)) == 1.0f);                          // tie -> even
  CHECK(float(half(1.0f + 0x1.0p-10f + 0x1.0p-11f)) == 1.0f + 0x1.0p-9f);
  CHECK(float(half(65504.0f)) == 65504.0f);                                // largest finite
  CHECK(float(half(65519.0f)) == 65504.0f);
  CHECK(std::isinf(float(half(65520.0f))));
  CHECK(float(half(0x1.0p-24f)) == 0x1.0p-24f);                            // smallest subnormal
  CHECK(float(half(0x1.0p-25f)) == 0.0f);                                  // tie -> even (0)
  CHECK(float(half(3 * 0x1.0p-25f)) == 0x1.0p-23f);                        // tie -> even (2)
  CHECK(float(half(-0.5f)) == -0.5f);
  CHECK(std::isnan(float(half(std::numeric_limits<float>::quiet_NaN()))));
  // Every fp16 value survives a round trip through float.
  for (uint32_t b = 0; b < 0x7c00u; ++b) CHECK_EQ(half::from_float(half::to_float(static_cast<uint16_t>(b))), b);
}

namespace {

// The e4m3 code nearest to x, found by search over every finite code (ties to the even code,
// |x| >= 448 saturating, NaN to 0x7f with x's sign): what fp8_e4m3::from_float must give.
uint8_t nearest_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7f);
  const double a = std::abs(static_cast<double>(x));
  uint8_t best = 0;
  for (uint8_t c = 1; c <= 0x7e; ++c) {
    const double d = std::abs(double(fp8_e4m3::to_float(c)) - a);
    const double d_best = std::abs(double(fp8_e4m3::to_float(best)) - a);
    if (d < d_best || (d == d_best && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>(sign | best);
}

}  // namespace

TEST_CASE("cpu types: fp8 e4m3 encodes by hand-checked values, rounding to nearest even and saturating") {
  auto bits = [](float x) { return int{fp8_e4m3::from_float(x)}; };
  CHECK(bits(0.0f) == 0x00);
  CHECK(bits(-0.0f) == 0x80);
  CHECK(bits(1.0f) == 0x38);      // exponent 7 (bias 7), mantissa 0
  CHECK(bits(-1.5f) == 0xbc);     // sign, exponent 7, mantissa 4/8
  CHECK(bits(0.0625f) == 0x18);   // 2^-4: exponent 3
  CHECK(bits(448.0f) == 0x7e);    // largest finite
  CHECK(bits(449.0f) == 0x7e);    // saturated, not NaN
  CHECK(bits(464.0f) == 0x7e);    // the tie with the 480 e4m3 lacks
  CHECK(bits(1e9f) == 0x7e);
  CHECK(bits(-1e9f) == 0xfe);
  CHECK(bits(std::numeric_limits<float>::infinity()) == 0x7e);   // SATFINITE: inf too
  CHECK(bits(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK(bits(0x1.0p-9f) == 0x01);               // smallest subnormal
  CHECK(bits(0x1.0p-10f) == 0x00);              // tie -> even (0)
  CHECK(bits(3 * 0x1.0p-10f) == 0x02);          // tie -> even (2)
  CHECK(bits(0x1.0p-6f) == 0x08);               // smallest normal
  CHECK(bits(15 * 0x1.0p-10f) == 0x08);         // 7.5·2^-9: tie -> even rounds up into the normals
  CHECK(bits(1.0f + 0x1.0p-4f) == 0x38);        // tie between 1 and 1.125 -> even (1)
  CHECK(bits(1.0f + 3 * 0x1.0p-4f) == 0x3a);    // tie between 1.125 and 1.25 -> even (1.25)
  CHECK(bits(1.0f + 0x1.0p-4f + 0x1.0p-12f) == 0x39);  // above the tie
  CHECK(bits(432.0f) == 0x7e);                  // tie between 416 and 448 -> even (448)
  CHECK((bits(std::numeric_limits<float>::quiet_NaN()) & 0x7f) == 0x7f);
  CHECK(bits(std::numeric_limits<float>::denorm_min()) == 0x00);
}

TEST_CASE("cpu types: fp8 e4m3 decodes every code exactly and encodes as the nearest-code search does") {
  CHECK(fp8_e4m3::to_float(0x38) == 1.0f);
  CHECK(fp8_e4m3::to_float(0x7e) == 448.0f);
  CHECK(fp8_e4m3::to_float(0xfe) == -448.0f);
  CHECK(fp8_e4m3::to_float(0x01) == 0x1.0p-9f);
  CHECK(fp8_e4m3::to_float(0x07) == 7 * 0x1.0p-9f);
  CHECK(fp8_e4m3::to_float(0x08) == 0x1.0p-6f);
  CHECK(std::signbit(fp8_e4m3::to_float(0x80)));
  CHECK(std::isnan(fp8_e4m3::to_float(0x7f)));
  CHECK(std::isnan(fp8_e4m3::to_float(0xff)));
  CHECK(to_f32(fp8_e4m3(-2.5f)) == -2.5f);
  // Every finite code survives a round trip through float, and the codes are ordered.
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    CAPTURE(b);
    CHECK(int{fp8_e4m3::from_float(fp8_e4m3::to_float(static_cast<uint8_t>(b)))} == b);
    auto magnitude = [](int code) { return std::abs(fp8_e4m3::to_float(static_cast<uint8_t>(code))); };
    if ((b & 0x7f) > 0) CHECK(magnitude(b) > magnitude(b - 1));
  }
  // Every midpoint between neighbouring codes, a hair either side of it, and random values over
  // the whole range (subnormals to past saturation) round as the search says.
  std::vector<float> xs;
  for (uint8_t c = 0; c < 0x7e; ++c) {
    const float lo = fp8_e4m3::to_float(c), hi = fp8_e4m3::to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;  // exact: a few mantissa bits
    xs.insert(xs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)});
  }
  std::mt19937_64 rng(123);
  std::uniform_real_distribution<float> log2(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) xs.push_back(std::exp2(log2(rng)));
  for (const float x : xs)
    for (const float v : {x, -x}) {
      CAPTURE(v);
      CHECK(int{fp8_e4m3::from_float(v)} == int{nearest_e4m3(v)});
    }
}

TEST_CASE("cpu types: fp8 is a storage of one byte that convert() narrows into and widens from") {
  CHECK(storage_of(perfsim::DType::fp8) == Storage::f8e4m3);
  CHECK(bytes_of(Storage::f8e4m3) == 1);
  CHECK(storage_of(perfsim::DType::int8) == Storage::unsupported);
  const std::vector<float> src{0.0f, 1.0f, -3.3f, 500.0f, 0x1.0p-9f, 0.1f};
  std::vector<fp8_e4m3> q(src.size());
  convert(src.data(), Storage::f32, q.data(), Storage::f8e4m3, 6);
  std::vector<bf16> wide(src.size());
  convert(q.data(), Storage::f8e4m3, wide.data(), Storage::bf16, 6);  // every e4m3 value is a bf16 one
  for (std::size_t i = 0; i < src.size(); ++i) {
    CHECK(q[i].bits == fp8_e4m3::from_float(src[i]));
    CHECK(float(wide[i]) == fp8_e4m3::to_float(q[i].bits));
  }
  CHECK(float(wide[3]) == 448.0f);
}

TEST_CASE("cpu embedding: gather with learned positions, scatter-add backward") {
  EmbeddingShape e;
  e.tokens = 6, e.vocab = 5, e.hidden = 3, e.seq = 3, e.position = 2, e.max_positions = 8;
  const std::vector<int32_t> ids{4, 0, 4, 1, 1, 1};  // duplicates exercise the scatter-add
  const auto table = random_vec(15, 71), pos = random_vec(24, 72);
  std::vector<float> x(18);
  embedding(ids.data(), table.data(), pos.data(), x.data(), e);
  std::vector<double> want(18);
  for (int t = 0; t < 6; ++t)
    for (int c = 0; c < 3; ++c)
      want[static_cast<std::size_t>(t * 3 + c)] =
          double(table[static_cast<std::size_t>(ids[static_cast<std::size_t>(t)] * 3 + c)]) +
          pos[static_cast<std::size_t>((2 + t % 3) * 3 + c)];
  CHECK(rel_err(x, want) < 1e-6);
  embedding(ids.data(), table.data(), nullptr, x.data(), e);  // rope models: no positions
  CHECK(x[0] == table[12]);

  const auto dx = random_vec(18, 73);
  std::vector<float> dtable(15, 123.0f), dpos(24, 123.0f);  // overwritten
  embedding_bwd(ids.data(), dx.data(), dtable.data(), dpos.data(), e);
  std::vector<double> want_t(15), want_p(24);
  for (int t = 0; t < 6; ++t)
    for (int c = 0; c < 3; ++c) {
      want_t[static_cast<std::size_t>(ids[static_cast<std::size_t>(t)] * 3 + c)] += dx[static_cast<std::size_t>(t * 3 + c)];
      want_p[static_cast<std::size_t>((2 + t % 3) * 3 + c)] += dx[static_cast<std::size_t>(t * 3 + c)];
    }
  CHECK(rel_err(dtable, want_t) < 1e-6);
  CHECK(rel_err(dpos, want_p) < 1e-6);
  CHECK(dtable[6] == 0.0f);  // id 2 never appears
  // Accumulate: adds on top of what the table gradient holds (tied lm_head part).
  e.accumulate = true;
  embedding_bwd(ids.data(), dx.data(), dtable.data(), nullptr, e);
  for (double& v : want_t) v *= 2;
  CHECK(rel_err(dtable, want_t) < 1e-6);
}

TEST_CASE("cpu embedding: out-of-range ids are reported") {
  EmbeddingShape e;
  e.tokens = 2, e.vocab = 3, e.hidden = 2, e.seq = 2;
  const std::vector<int32_t> ids{1, 3};
  const std::vector<float> table(6, 1.0f);
  std::vector<float> x(4);
  CHECK_THROWS_WITH_AS(embedding(ids.data(), table.data(), nullptr, x.data(), e),
                       doctest::Contains("outside [0, 3)"), std::out_of_range);
}

TEST_CASE("cpu cross_entropy: loss by hand, gradient against finite differences") {
  {
    // Uniform logits over 4 classes: loss = log 4; gradient (1/4 − [c == target]) / rows.
    const std::vector<float> logits(8, 0.5f);
    const std::vector<int32_t> targets{2, 0};
    std::vector<float> loss(2), d(8);
    cross_entropy(logits.data(), targets.data(), loss.data(), d.data(), 2, 4);
    CHECK(loss[0] == approx(std::log(4.0)));
    CHECK(d[2] == approx((0.25 - 1) / 2));
    CHECK(d[3] == approx(0.25 / 2));
  }
  const int64_t rows = 3, cols = 11;
  auto logits = random_vec(static_cast<std::size_t>(rows * cols), 81, 2.0f);
  const auto targets = random_ids(static_cast<std::size_t>(rows), cols, 82);
  std::vector<float> loss(static_cast<std::size_t>(rows)), d(logits.size());
  cross_entropy(logits.data(), targets.data(), loss.data(), d.data(), rows, cols);
  std::vector<double> want(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(double(logits[static_cast<std::size_t>(r * cols + c)]));
    want[static_cast<std::size_t>(r)] = std::log(s) - logits[static_cast<std::size_t>(r * cols + targets[static_cast<std::size_t>(r)])];
  }
  CHECK(rel_err(loss, want) < 1e-5);
  // dlogits is the gradient of the mean loss.
  std::vector<double> fd(logits.size());
  const float h = 5e-3f;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float keep = logits[i];
    double up = 0, down = 0;
    logits[i] = keep + h;
    cross_entropy(logits.data(), targets.data(), loss.data(), nullptr, rows, cols);
    for (float l : loss) up += l;
    logits[i] = keep - h;
    cross_entropy(logits.data(), targets.data(), loss.data(), nullptr, rows, cols);
    for (float l : loss) down += l;
    logits[i] = keep;
    fd[i] = (up - down) / (2.0 * h) / static_cast<double>(rows);
  }
  CHECK(rel_err(d, fd) < 2e-3);
}

namespace {

struct AdamWState {
  std::vector<float> p, g, m, v;
};

AdamWState adamw_state(std::size_t n, uint64_t seed) {
  AdamWState s{random_vec(n, seed, 0.02f), random_vec(n, seed + 1, 0.01f), random_vec(n, seed + 2, 0.001f),
               random_vec(n, seed + 3, 0.001f)};
  for (float& x : s.v) x = x * x;  // second moments are non-negative
  return s;
}

AdamWGroup group_of(AdamWState& s) {
  AdamWGroup g;
  g.param = s.p.data(), g.grad = s.g.data(), g.m = s.m.data(), g.v = s.v.data();
  g.n = static_cast<int64_t>(s.p.size());
  return g;
}

}  // namespace

TEST_CASE("cpu adamw: one step matches the AdamW formulas") {
  AdamWState s = adamw_state(5000, 91);  // more than two work blocks
  const AdamWState before = s;
  AdamWParams p;
  p.lr = 1e-3f, p.beta1 = 0.9f, p.beta2 = 0.95f, p.weight_decay = 0.1f, p.step = 1;
  adamw({group_of(s)}, p, 1);
  std::vector<double> want_p(s.p.size()), want_m(s.p.size()), want_v(s.p.size());
  for (std::size_t i = 0; i < s.p.size(); ++i) {
    const double g = before.g[i];
    want_m[i] = 0.9 * before.m[i] + 0.1 * g;
    want_v[i] = 0.95 * before.v[i] + 0.05 * g * g;
    const double mhat = want_m[i] / (1 - 0.9), vhat = want_v[i] / (1 - 0.95);
    want_p[i] = before.p[i] * (1 - 1e-3 * 0.1) - 1e-3 * mhat / (std::sqrt(vhat) + 1e-8);
  }
  CHECK(rel_err(s.m, want_m) < 1e-5);
  CHECK(rel_err(s.v, want_v) < 1e-5);
  CHECK(rel_err(s.p, want_p) < 1e-5);
}

TEST_CASE("cpu adamw: fused equals unfused for any number of sweeps") {
  AdamWParams p;
  p.lr = 3e-3f;
  AdamWState a1 = adamw_state(3000, 101), a2 = adamw_state(17, 105);
  adamw({group_of(a1), group_of(a2)}, p, 1);
  for (int passes : {2, 3, 4, 7}) {
    CAPTURE(passes);
    AdamWState b1 = adamw_state(3000, 101), b2 = adamw_state(17, 105);
    adamw({group_of(b1), group_of(b2)}, p, passes);
    CHECK(b1.p == a1.p);
    CHECK(b1.m == a1.m);
    CHECK(b1.v == a1.v);
    CHECK(b2.p == a2.p);
  }
}

TEST_CASE("cpu adamw: a master-weight group updates fp32 and writes the bf16 weight") {
  AdamWState s = adamw_state(100, 111);
  std::vector<bf16> grad = to_storage<bf16>(s.g), weight(100);
  AdamWState ref = s;
  ref.g = to_floats(grad);  // the master update sees the bf16 gradient
  AdamWParams p;
  AdamWGroup g = group_of(s);
  g.grad = grad.data(), g.grad_type = Storage::bf16;
  g.weight = weight.data(), g.weight_type = Storage::bf16;
  adamw({g}, p, 4);
  adamw({group_of(ref)}, p, 4);
  CHECK(s.p == ref.p);
  CHECK(to_floats(weight) == rounded<bf16>(s.p));
}

TEST_CASE("cpu memory ops: kv_append, slice_last_token, copy") {
  KvAppendShape s;
  s.batch = 2, s.seq_new = 2, s.capacity = 5, s.row = 3, s.position = 3;
  std::vector<float> cache(30, -1.0f), k_new(12);
  for (std::size_t i = 0; i < 12; ++i) k_new[i] = static_cast<float>(i);
  kv_append(k_new.data(), cache.data(), s);
  CHECK(cache[static_cast<std::size_t>((0 * 5 + 3) * 3)] == 0.0f);   // batch 0, row 3
  CHECK(cache[static_cast<std::size_t>((0 * 5 + 4) * 3 + 2)] == 5.0f);
  CHECK(cache[static_cast<std::size_t>((1 * 5 + 3) * 3)] == 6.0f);   // batch 1, row 3
  CHECK(cache[static_cast<std::size_t>((1 * 5 + 2) * 3)] == -1.0f);  // untouched
  s.position = 4;
  CHECK_THROWS_AS(kv_append(k_new.data(), cache.data(), s), std::out_of_range);

  std::vector<float> x(12), y(4);  // 2 sequences of 3 rows, 2 columns
  for (std::size_t i = 0; i < 12; ++i) x[i] = static_cast<float>(i);
  slice_last_token(x.data(), y.data(), 2, 3, 2);
  CHECK(y == std::vector<float>{4, 5, 10, 11});

  const auto src = random_vec(1000, 121);
  std::vector<bf16> dst(1000);
  copy_tensor(src.data(), Storage::f32, dst.data(), Storage::bf16, 1000);
  CHECK(to_floats(dst) == rounded<bf16>(src));
  std::vector<float> same(1000);
  copy_tensor(src.data(), Storage::f32, same.data(), Storage::f32, 1000);
  CHECK(same == src);
}
