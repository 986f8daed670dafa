// CPU convolution, pooling and batch-norm kernels against direct double-precision loops; the
// gradients through the adjoint identities <conv(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x,
// dy)> (and the pools' alike), batch norm's backward against central finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "backends/cpu/cpu_kernels.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim::cpu;
using namespace perfsim::cpu::test;

namespace {

ConvShape shape(int64_t batch, int64_t h, int64_t w, int64_t c, int64_t k, int64_t r, int64_t s, int64_t stride,
                int64_t pad, int64_t dilation, int64_t groups) {
  ConvShape x;
  x.batch = batch, x.height = h, x.width = w, x.channels = c, x.filters = k, x.kernel_h = r, x.kernel_w = s;
  x.stride = stride, x.pad = pad, x.dilation = dilation, x.groups = groups;
  x.out_h = (h + 2 * pad - dilation * (r - 1) - 1) / stride + 1;
  x.out_w = (w + 2 * pad - dilation * (s - 1) - 1) / stride + 1;
  return x;
}

// The convolution by its definition, in double.
std::vector<double> direct_conv(const std::vector<float>& x, const std::vector<float>& w, const ConvShape& s) {
  const int64_t cg = s.channels / s.groups, kg = s.filters / s.groups;
  std::vector<double> y(static_cast<std::size_t>(s.y_elements()), 0.0);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t p = 0; p < s.out_h; ++p)
      for (int64_t q = 0; q < s.out_w; ++q)
        for (int64_t k = 0; k < s.filters; ++k) {
          const int64_t g = k / kg;
          double acc = 0;
          for (int64_t r = 0; r < s.kernel_h; ++r)
            for (int64_t t = 0; t < s.kernel_w; ++t) {
              const int64_t h = p * s.stride - s.pad + r * s.dilation, v = q * s.stride - s.pad + t * s.dilation;
              if (h < 0 || h >= s.height || v < 0 || v >= s.width) continue;
              for (int64_t c = 0; c < cg; ++c)
                acc += double(x[static_cast<std::size_t>(((n * s.height + h) * s.width + v) * s.channels + g * cg + c)]) *
                       w[static_cast<std::size_t>(((k * s.kernel_h + r) * s.kernel_w + t) * cg + c)];
            }
          y[static_cast<std::size_t>(((n * s.out_h + p) * s.out_w + q) * s.filters + k)] = acc;
        }
  return y;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

const ConvShape conv_cases[] = {
    shape(2, 7, 6, 5, 8, 3, 3, 1, 1, 1, 1),    // 3×3, padding 1
    shape(1, 11, 9, 3, 6, 7, 7, 2, 3, 1, 1),   // ResNet's stem: 7×7/2, padding 3
    shape(2, 6, 6, 8, 12, 1, 1, 2, 0, 1, 1),   // a strided 1×1 (a bottleneck's shortcut)
    shape(2, 8, 8, 6, 9, 3, 3, 1, 2, 2, 3),    // grouped, dilated
    shape(3, 5, 5, 4, 4, 3, 3, 1, 1, 1, 4),    // depthwise
};

}  // namespace

TEST_CASE("cpu conv2d matches the convolution's definition; its gradients are its adjoints") {
  for (const ConvShape& s : conv_cases) {
    CAPTURE(s.kernel_h);
    CAPTURE(s.groups);
    const auto x = random_vec(static_cast<std::size_t>(s.x_elements()), 1);
    const auto w = random_vec(static_cast<std::size_t>(s.w_elements()), 2);
    const auto dy = random_vec(static_cast<std::size_t>(s.y_elements()), 3);
    std::vector<float> y(static_cast<std::size_t>(s.y_elements())), dx(x.size()), dw(w.size());
    conv2d(x.data(), w.data(), static_cast<const float*>(nullptr), y.data(), s);
    CHECK(rel_err(y, direct_conv(x, w, s)) < 1e-5);
    conv2d_dgrad(dy.data(), w.data(), dx.data(), s);
    conv2d_wgrad(x.data(), dy.data(), dw.data(), s);
    const double forward = dot(y, dy);
    CHECK(dot(x, dx) == doctest::Approx(forward).epsilon(1e-4));
    CHECK(dot(w, dw) == doctest::Approx(forward).epsilon(1e-4));
  }
}

TEST_CASE("cpu conv2d's epilogue: a bias per filter, then the ReLU of a folded conv+BN+ReLU") {
  ConvShape s = conv_cases[3];  // grouped, dilated
  const auto x = random_vec(static_cast<std::size_t>(s.x_elements()), 12);
  const auto w = random_vec(static_cast<std::size_t>(s.w_elements()), 13);
  const auto bias = random_vec(static_cast<std::size_t>(s.filters), 14);
  std::vector<double> want = direct_conv(x, w, s);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + bias[i % std::size_t(s.filters)]);
  s.relu = true;
  std::vector<float> y(want.size());
  conv2d(x.data(), w.data(), bias.data(), y.data(), s);
  CHECK(rel_err(y, want) < 1e-5);
  int zeros = 0;
  for (float v : y) zeros += v == 0.0f ? 1 : 0;
  CHECK(zeros > 0);  // the ReLU cut something
}

TEST_CASE("cpu conv2d at bf16 stays close to fp32") {
  const ConvShape s = conv_cases[0];
  const auto x = random_vec(static_cast<std::size_t>(s.x_elements()), 4);
  const auto w = random_vec(static_cast<std::size_t>(s.w_elements()), 5);
  const auto xb = to_storage<bf16>(x), wb = to_storage<bf16>(w);
  std::vector<bf16> yb(static_cast<std::size_t>(s.y_elements()));
  conv2d(xb.data(), wb.data(), static_cast<const bf16*>(nullptr), yb.data(), s);
  CHECK(rel_err(to_floats(yb), direct_conv(x, w, s)) < 2e-2);
}

TEST_CASE("cpu pools: max and mean over each window's in-bounds elements, and their adjoints") {
  // 3×3/2 with padding 1 (ResNet's stem pool) and a global window.
  for (const ConvShape& s : {shape(2, 9, 7, 5, 5, 3, 3, 2, 1, 1, 1), shape(3, 4, 5, 6, 6, 4, 5, 1, 0, 1, 1)}) {
    CAPTURE(s.kernel_h);
    const auto x = random_vec(static_cast<std::size_t>(s.x_elements()), 6);
    const auto dy = random_vec(static_cast<std::size_t>(s.y_elements()), 7);
    std::vector<float> mx(static_cast<std::size_t>(s.y_elements())), av(mx.size()), dmx(x.size()), dav(x.size());
    maxpool(x.data(), mx.data(), s);
    avgpool(x.data(), av.data(), s);
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t p = 0; p < s.out_h; ++p)
        for (int64_t q = 0; q < s.out_w; ++q)
          for (int64_t c = 0; c < s.channels; ++c) {
            double m = -std::numeric_limits<double>::infinity(), sum = 0;
            int count = 0;
            for (int64_t h = p * s.stride - s.pad; h < p * s.stride - s.pad + s.kernel_h; ++h)
              for (int64_t v = q * s.stride - s.pad; v < q * s.stride - s.pad + s.kernel_w; ++v) {
                if (h < 0 || h >= s.height || v < 0 || v >= s.width) continue;
                const double e = x[static_cast<std::size_t>(((n * s.height + h) * s.width + v) * s.channels + c)];
                m = std::max(m, e), sum += e, ++count;
              }
            const auto i = static_cast<std::size_t>(((n * s.out_h + p) * s.out_w + q) * s.channels + c);
            CHECK(mx[i] == doctest::Approx(m));
            CHECK(av[i] == doctest::Approx(sum / count).epsilon(1e-5));
          }
    avgpool_bwd(dy.data(), dav.data(), s);
    CHECK(dot(x, dav) == doctest::Approx(dot(av, dy)).epsilon(1e-4));
    // The max's gradient: each dy lands whole on an element equal to its window's maximum.
    maxpool_bwd(x.data(), dy.data(), dmx.data(), s);
    double dy_sum = 0, dx_sum = 0;
    for (float v : dy) dy_sum += v;
    for (float v : dmx) dx_sum += v;
    CHECK(dx_sum == doctest::Approx(dy_sum).epsilon(1e-4));
    CHECK(dot(x, dmx) == doctest::Approx(dot(mx, dy)).epsilon(1e-4));
  }
}

TEST_CASE("cpu batch norm: batch statistics, running statistics, and a backward that is the derivative") {
  const int64_t rows = 37, cols = 6;
  const float eps = 1e-5f;
  const auto x = random_vec(static_cast<std::size_t>(rows * cols), 8, 2.0f);
  const auto gamma = random_vec(static_cast<std::size_t>(cols), 9);
  const auto beta = random_vec(static_cast<std::size_t>(cols), 10);
  std::vector<float> y(x.size()), mean(cols), rstd(cols);
  batchnorm(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols, eps);
  for (int64_t c = 0; c < cols; ++c) {
    double m = 0, v = 0;
    for (int64_t r = 0; r < rows; ++r) m += x[static_cast<std::size_t>(r * cols + c)];
    m /= rows;
    for (int64_t r = 0; r < rows; ++r) v += std::pow(x[static_cast<std::size_t>(r * cols + c)] - m, 2);
    v /= rows;  // biased, as training normalizes
    CHECK(mean[static_cast<std::size_t>(c)] == doctest::Approx(m).epsilon(1e-5));
    CHECK(rstd[static_cast<std::size_t>(c)] == doctest::Approx(1 / std::sqrt(v + eps)).epsilon(1e-5));
    const auto i = static_cast<std::size_t>(5 * cols + c);
    CHECK(y[i] == doctest::Approx((x[i] - m) / std::sqrt(v + eps) * gamma[static_cast<std::size_t>(c)] +
                                  beta[static_cast<std::size_t>(c)]).epsilon(1e-4));
  }
  // Inference with the batch's own statistics as running ones gives the training output.
  std::vector<float> var(cols), y_infer(x.size());
  for (int64_t c = 0; c < cols; ++c) var[static_cast<std::size_t>(c)] = 1 / (rstd[static_cast<std::size_t>(c)] * rstd[static_cast<std::size_t>(c)]) - eps;
  batchnorm_infer(x.data(), gamma.data(), beta.data(), mean.data(), var.data(), y_infer.data(), rows, cols, eps);
  CHECK(rel_err(y_infer, y) < 1e-4);

  // L = Σ dy ⊙ y: dx, dgamma, dbeta against central differences of the forward.
  const auto dy = random_vec(x.size(), 11);
  std::vector<float> dx(x.size()), dgamma(cols), dbeta(cols);
  batchnorm_bwd(x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dgamma.data(), dbeta.data(),
                rows, cols);
  auto loss = [&](const std::vector<float>& xs, const std::vector<float>& gs, const std::vector<float>& bs) {
    std::vector<float> ys(xs.size()), m(cols), r(cols);
    batchnorm(xs.data(), gs.data(), bs.data(), ys.data(), m.data(), r.data(), rows, cols, eps);
    return dot(ys, dy);
  };
  const float h = 1e-2f;
  for (std::size_t i : {std::size_t{0}, std::size_t{47}, std::size_t{221}}) {
    auto xp = x, xm = x;
    xp[i] += h, xm[i] -= h;
    CHECK(dx[i] == doctest::Approx((loss(xp, gamma, beta) - loss(xm, gamma, beta)) / (2 * h)).epsilon(2e-2));
  }
  for (std::size_t c : {std::size_t{0}, std::size_t{5}}) {
    auto gp = gamma, gm = gamma, bp = beta, bm = beta;
    gp[c] += h, gm[c] -= h, bp[c] += h, bm[c] -= h;
    CHECK(dgamma[c] == doctest::Approx((loss(x, gp, beta) - loss(x, gm, beta)) / (2 * h)).epsilon(1e-2));
    CHECK(dbeta[c] == doctest::Approx((loss(x, gamma, bp) - loss(x, gamma, bm)) / (2 * h)).epsilon(1e-2));
  }
}

TEST_CASE("cpu relu and its backward") {
  const std::vector<float> x{-2.0f, -0.0f, 0.5f, 3.0f}, dy{1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> y(4), dx(4);
  relu(x.data(), y.data(), 4);
  CHECK(y == std::vector<float>{0.0f, 0.0f, 0.5f, 3.0f});
  relu_bwd(y.data(), dy.data(), dx.data(), 4);
  CHECK(dx == std::vector<float>{0.0f, 0.0f, 3.0f, 4.0f});
}
