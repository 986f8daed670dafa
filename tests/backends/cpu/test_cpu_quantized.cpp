// The host's quantized weights (backends/common/quantized_weights.hpp): the layout worked by
// hand, the fused decode product against the dequantized weight's, and W8A8's row quantization.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/common/bf16.hpp"
#include "backends/common/quantized_weights.hpp"

using namespace perfsim;
using namespace perfsim::host;

TEST_CASE("quantized weights: an int4 weight of 2 × 2 dequantized by hand") {
  QuantLayout q;
  q.k = 2, q.n = 2, q.group = 2, q.int4 = true, q.zeros = true;
  REQUIRE(q.bytes() == 2 + 2 * 2 + 2 * 2);  // four nibbles, a scale and a zero per channel
  std::vector<uint8_t> data(q.bytes());
  // (k, n): (0,0) = 3, (0,1) = 12, (1,0) = 8, (1,1) = 0, the low nibble first.
  data[0] = 3 | (12 << 4);
  data[1] = 8;
  auto put = [&](std::size_t at, float v) {
    const uint16_t b = bf16(v).bits;
    data[at] = static_cast<uint8_t>(b & 0xFF);
    data[at + 1] = static_cast<uint8_t>(b >> 8);
  };
  put(q.scale_offset(), 0.5f);  // channel 0
  put(q.scale_offset() + 2, 0.25f);
  put(q.zero_offset(), 8.0f);
  put(q.zero_offset() + 2, 8.0f);
  std::vector<float> w(4);
  dequantize(data.data(), q, w.data());
  CHECK(w == std::vector<float>{(3 - 8) * 0.5f, (12 - 8) * 0.25f, (8 - 8) * 0.5f, (0 - 8) * 0.25f});
}

TEST_CASE("quantized weights: the fused product is the dequantized weight's") {
  for (const bool int4 : {true, false}) {
    CAPTURE(int4);
    QuantLayout q;
    q.k = 256, q.n = 520, q.int4 = int4, q.zeros = int4, q.group = int4 ? 64 : 256;  // 520: a partial block
    std::vector<uint8_t> data(q.bytes());
    fill_quantized(data.data(), q, 17);
    std::vector<float> w(static_cast<std::size_t>(q.k * q.n));
    dequantize(data.data(), q, w.data());
    // Drawn near N(0, 0.02), as the unquantized weights: not all zero, none beyond 0.02·1.5·8.
    double sum2 = 0, most = 0;
    for (float x : w) sum2 += x * x, most = std::max(most, static_cast<double>(std::fabs(x)));
    CHECK(std::sqrt(sum2 / static_cast<double>(w.size())) > 0.005);
    CHECK(most <= 0.02 * 1.5 * 8 + 1e-6);
    const int64_t m = 3;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    std::vector<float> a(static_cast<std::size_t>(m * q.k)), got(static_cast<std::size_t>(m * q.n));
    for (float& x : a) x = nd(rng);
    quantized_gemv(a.data(), m, data.data(), q, got.data());
    double err = 0, scale = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < q.n; ++j) {
        double ref = 0;
        for (int64_t k = 0; k < q.k; ++k)
          ref += static_cast<double>(a[static_cast<std::size_t>(i * q.k + k)]) * w[static_cast<std::size_t>(k * q.n + j)];
        err = std::max(err, std::fabs(ref - got[static_cast<std::size_t>(i * q.n + j)]));
        scale = std::max(scale, std::fabs(ref));
      }
    CHECK(err <= 1e-5 * scale);
  }
}

TEST_CASE("quantized weights: W8A8's rows quantized to int8 steps of max|row| / 127") {
  std::vector<float> x{0.5f, -1.27f, 0.004f, 0.0f, 0.0f, 0.0f, 2.0f, -0.3f};
  fake_quantize_rows(x.data(), 2, 4);
  CHECK(x[1] == doctest::Approx(-1.27f));  // the largest keeps its value
  CHECK(x[0] == doctest::Approx(50 * 0.01f));
  CHECK(x[2] == 0.0f);                     // under half a step
  CHECK(x[4] == 0.0f);
  CHECK(x[6] == doctest::Approx(2.0f));
  CHECK(x[7] == doctest::Approx(std::nearbyint(-0.3f / (2.0f / 127)) * (2.0f / 127)));
}

TEST_CASE("quantized weights: scales are a row of N per group of K, as GPTQ stores them") {
  QuantLayout q;
  q.k = 4, q.n = 2, q.group = 2;  // int8, two groups per channel
  std::vector<uint8_t> data(q.bytes());
  REQUIRE(q.bytes() == 8 + 2 * 2 * 2);
  for (std::size_t i = 0; i < 8; ++i) data[i] = 1;  // every value 1
  // Scales [K / group][N]: group 0 of channels 0 and 1, then group 1 of both.
  const float scales[4] = {1.0f, 2.0f, 4.0f, 8.0f};
  for (std::size_t s = 0; s < 4; ++s) {
    const uint16_t b = bf16(scales[s]).bits;
    data[8 + 2 * s] = static_cast<uint8_t>(b & 0xFF);
    data[8 + 2 * s + 1] = static_cast<uint8_t>(b >> 8);
  }
  std::vector<float> w(8);
  dequantize(data.data(), q, w.data());
  // Rows k = 0, 1 read group 0's scales; rows 2, 3 group 1's.
  CHECK(w == std::vector<float>{1, 2, 1, 2, 4, 8, 4, 8});
}
