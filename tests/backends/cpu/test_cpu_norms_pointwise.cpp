// CPU norm and pointwise kernels against double references, gradients against central
// finite differences of the forward kernels, and the fused residual+norm against the two
// ops it replaces.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <numbers>

#include "approx.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim::cpu;
using perfsim::test::approx;
using namespace perfsim::cpu::test;

namespace {

constexpr float eps = 1e-5f;

std::vector<double> ref_layernorm(const std::vector<float>& x, const std::vector<float>& g,
                                  const std::vector<float>& b, int64_t rows, int64_t cols) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[static_cast<std::size_t>(r * cols + c)];
    mean /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double d = x[static_cast<std::size_t>(r * cols + c)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      y[i] = (x[i] - mean) / std::sqrt(var + eps) * g[static_cast<std::size_t>(c)] + b[static_cast<std::size_t>(c)];
    }
  }
  return y;
}

std::vector<double> ref_rmsnorm(const std::vector<float>& x, const std::vector<float>& g, int64_t rows,
                                int64_t cols) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(x[static_cast<std::size_t>(r * cols + c)]) * x[static_cast<std::size_t>(r * cols + c)];
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      y[i] = x[i] * rstd * g[static_cast<std::size_t>(c)];
    }
  }
  return y;
}

// Σ w ⊙ v in double.
double weighted_sum(const std::vector<float>& w, const std::vector<float>& v) {
  double s = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += double(w[i]) * v[i];
  return s;
}

// Central differences of loss() with respect to every element of *x.
std::vector<double> numeric_grad(std::vector<float>* x, const std::function<double()>& loss, float h = 5e-3f) {
  std::vector<double> g(x->size());
  for (std::size_t i = 0; i < x->size(); ++i) {
    const float keep = (*x)[i];
    (*x)[i] = keep + h;
    const double up = loss();
    (*x)[i] = keep - h;
    const double down = loss();
    (*x)[i] = keep;
    g[i] = (up - down) / (2.0 * static_cast<double>(h));
  }
  return g;
}

constexpr double fd_tol = 2e-3;  // central differences in fp32 with h = 5e-3

}  // namespace

TEST_CASE("cpu norms: layernorm and rmsnorm match the reference") {
  for (const auto& shape : {std::pair<int64_t, int64_t>{3, 7}, {5, 64}, {2, 129}}) {
    const int64_t rows = shape.first, cols = shape.second;
    CAPTURE(cols);
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto x = random_vec(n, 1, 2.0f), g = random_vec(static_cast<std::size_t>(cols), 2), b = random_vec(static_cast<std::size_t>(cols), 3);
    std::vector<float> y(n);
    layernorm(x.data(), g.data(), b.data(), y.data(), rows, cols, eps);
    CHECK(rel_err(y, ref_layernorm(x, g, b, rows, cols)) < 1e-5);
    rmsnorm(x.data(), g.data(), y.data(), rows, cols, eps);
    CHECK(rel_err(y, ref_rmsnorm(x, g, rows, cols)) < 1e-5);

    const auto xb = rounded<bf16>(x), gb = rounded<bf16>(g), bb = rounded<bf16>(b);
    const auto xs = to_storage<bf16>(xb), gs = to_storage<bf16>(gb), bs = to_storage<bf16>(bb);
    std::vector<bf16> yb(n);
    layernorm(xs.data(), gs.data(), bs.data(), yb.data(), rows, cols, eps);
    CHECK(rel_err(to_floats(yb), ref_layernorm(xb, gb, bb, rows, cols)) < 1e-2);
    rmsnorm(xs.data(), gs.data(), yb.data(), rows, cols, eps);
    CHECK(rel_err(to_floats(yb), ref_rmsnorm(xb, gb, rows, cols)) < 1e-2);
  }
}

TEST_CASE("cpu norms: rmsnorm 2x2 by hand") {
  // Row (3, 4): mean square 12.5, rstd = 1/sqrt(12.5) -> (0.8485, 1.1314) · gamma (1, 2).
  const std::vector<float> x{3, 4, 0, 0}, g{1, 2};
  std::vector<float> y(4);
  rmsnorm(x.data(), g.data(), y.data(), 2, 2, 0.0f + 1e-12f);
  CHECK(y[0] == approx(3 / std::sqrt(12.5)).epsilon(1e-6));
  CHECK(y[1] == approx(2 * 4 / std::sqrt(12.5)).epsilon(1e-6));
  CHECK(y[2] == 0.0f);
}

TEST_CASE("cpu norms: backward passes equal finite differences of the forward") {
  const int64_t rows = 3, cols = 6;
  const auto n = static_cast<std::size_t>(rows * cols);
  auto x = random_vec(n, 11), g = random_vec(static_cast<std::size_t>(cols), 12, 0.5f), b = random_vec(static_cast<std::size_t>(cols), 13);
  for (float& v : g) v += 1.0f;
  const auto dy = random_vec(n, 14);
  std::vector<float> y(n), dx(n), dg(static_cast<std::size_t>(cols)), db(static_cast<std::size_t>(cols));

  auto ln_loss = [&] {
    layernorm(x.data(), g.data(), b.data(), y.data(), rows, cols, eps);
    return weighted_sum(dy, y);
  };
  layernorm_bwd(x.data(), g.data(), dy.data(), dx.data(), dg.data(), db.data(), rows, cols, eps);
  CHECK(rel_err(dx, numeric_grad(&x, ln_loss)) < fd_tol);
  CHECK(rel_err(dg, numeric_grad(&g, ln_loss)) < fd_tol);
  CHECK(rel_err(db, numeric_grad(&b, ln_loss)) < fd_tol);

  auto rms_loss = [&] {
    rmsnorm(x.data(), g.data(), y.data(), rows, cols, eps);
    return weighted_sum(dy, y);
  };
  std::vector<float> dg2(static_cast<std::size_t>(cols));
  rmsnorm_bwd(x.data(), g.data(), dy.data(), dx.data(), dg2.data(), rows, cols, eps);
  CHECK(rel_err(dx, numeric_grad(&x, rms_loss)) < fd_tol);
  CHECK(rel_err(dg2, numeric_grad(&g, rms_loss)) < fd_tol);
}

TEST_CASE("cpu norms: gamma gradients sum over many rows (several column blocks)") {
  const int64_t rows = 37, cols = 150;
  const auto n = static_cast<std::size_t>(rows * cols);
  const auto x = random_vec(n, 21), g = random_vec(static_cast<std::size_t>(cols), 22), dy = random_vec(n, 23);
  std::vector<float> dx(n), dg(static_cast<std::size_t>(cols)), db(static_cast<std::size_t>(cols));
  layernorm_bwd(x.data(), g.data(), dy.data(), dx.data(), dg.data(), db.data(), rows, cols, eps);
  // dbeta = Σ_rows dy, dgamma = Σ_rows dy · x̂ with x̂ = (layernorm with gamma 1, beta 0).
  const std::vector<float> ones(static_cast<std::size_t>(cols), 1.0f), zeros(static_cast<std::size_t>(cols), 0.0f);
  const auto xhat = ref_layernorm(x, ones, zeros, rows, cols);
  std::vector<double> want_db(static_cast<std::size_t>(cols)), want_dg(static_cast<std::size_t>(cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      want_db[static_cast<std::size_t>(c)] += dy[i];
      want_dg[static_cast<std::size_t>(c)] += dy[i] * xhat[i];
    }
  CHECK(rel_err(db, want_db) < 1e-5);
  CHECK(rel_err(dg, want_dg) < 1e-5);
}

TEST_CASE("cpu norms: fused add_rmsnorm / add_layernorm equal residual_add then the norm") {
  const int64_t rows = 4, cols = 33;
  const auto n = static_cast<std::size_t>(rows * cols);
  const auto a = random_vec(n, 31), b = random_vec(n, 32), g = random_vec(static_cast<std::size_t>(cols), 33), be = random_vec(static_cast<std::size_t>(cols), 34);
  {
    std::vector<float> sum(n), y(n), sum2(n), y2(n);
    residual_add(a.data(), b.data(), sum.data(), static_cast<int64_t>(n));
    rmsnorm(sum.data(), g.data(), y.data(), rows, cols, eps);
    add_rmsnorm(a.data(), b.data(), g.data(), sum2.data(), y2.data(), rows, cols, eps);
    CHECK(sum2 == sum);
    CHECK(rel_err(y2, y) < 1e-6);
    layernorm(sum.data(), g.data(), be.data(), y.data(), rows, cols, eps);
    add_layernorm(a.data(), b.data(), g.data(), be.data(), sum2.data(), y2.data(), rows, cols, eps);
    CHECK(rel_err(y2, y) < 1e-6);
  }
  {
    // bf16: the fused op normalizes the rounded sum, exactly as the two ops do.
    const auto as = to_storage<bf16>(a), bs = to_storage<bf16>(b), gs = to_storage<bf16>(g);
    std::vector<bf16> sum(n), y(n), sum2(n), y2(n);
    residual_add(as.data(), bs.data(), sum.data(), static_cast<int64_t>(n));
    rmsnorm(sum.data(), gs.data(), y.data(), rows, cols, eps);
    add_rmsnorm(as.data(), bs.data(), gs.data(), sum2.data(), y2.data(), rows, cols, eps);
    CHECK(to_floats(sum2) == to_floats(sum));
    CHECK(rel_err(to_floats(y2), to_floats(y)) < 1e-2);
  }
}

TEST_CASE("cpu pointwise: gelu, silu_mul and residual_add match the formulas") {
  const std::size_t n = 1001;
  const auto x = random_vec(n, 41, 2.0f), u = random_vec(n, 42);
  std::vector<float> y(n);
  std::vector<double> want(n);
  gelu(x.data(), y.data(), static_cast<int64_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    want[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  }
  CHECK(rel_err(y, want) < 1e-5);
  silu_mul(x.data(), u.data(), y.data(), static_cast<int64_t>(n));
  for (std::size_t i = 0; i < n; ++i) want[i] = double(x[i]) / (1 + std::exp(-double(x[i]))) * u[i];
  CHECK(rel_err(y, want) < 1e-5);
  residual_add(x.data(), u.data(), y.data(), static_cast<int64_t>(n));
  for (std::size_t i = 0; i < n; ++i) want[i] = double(x[i]) + u[i];
  CHECK(rel_err(y, want) < 1e-6);
  // Hand values: gelu(0) = 0, silu(0)·u = 0, gelu(1) = 0.841192.
  const float one = 1.0f;
  float g1 = 0;
  gelu(&one, &g1, 1);
  CHECK(g1 == approx(0.841192).epsilon(1e-5));

  const auto xs = to_storage<half>(x);
  std::vector<half> yh(n);
  gelu(xs.data(), yh.data(), static_cast<int64_t>(n));
  const auto xr = rounded<half>(x);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = xr[i];
    want[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  }
  CHECK(rel_err(to_floats(yh), want) < 1e-2);
}

TEST_CASE("cpu pointwise: gelu and silu_mul gradients equal finite differences") {
  const std::size_t n = 40;
  auto x = random_vec(n, 51, 1.5f), u = random_vec(n, 52);
  const auto dy = random_vec(n, 53);
  std::vector<float> y(n), dx(n), du(n);
  auto gelu_loss = [&] {
    gelu(x.data(), y.data(), static_cast<int64_t>(n));
    return weighted_sum(dy, y);
  };
  gelu_bwd(x.data(), dy.data(), dx.data(), static_cast<int64_t>(n));
  CHECK(rel_err(dx, numeric_grad(&x, gelu_loss)) < fd_tol);

  auto silu_loss = [&] {
    silu_mul(x.data(), u.data(), y.data(), static_cast<int64_t>(n));
    return weighted_sum(dy, y);
  };
  silu_mul_bwd(x.data(), u.data(), dy.data(), dx.data(), du.data(), static_cast<int64_t>(n));
  CHECK(rel_err(dx, numeric_grad(&x, silu_loss)) < fd_tol);
  CHECK(rel_err(du, numeric_grad(&u, silu_loss)) < fd_tol);
}

TEST_CASE("cpu rope: hand rotation, reference, inverse and gradient") {
  {
    // head_dim 2: the pair (x0, x1) rotates by angle = position (inv_freq 1).
    RopeShape r;
    r.tokens = 2, r.heads = 1, r.head_dim = 2, r.seq = 2, r.position = 0;
    const std::vector<float> x{1, 0, 1, 0};
    std::vector<float> y(4);
    rope(x.data(), y.data(), r);
    CHECK(y[0] == approx(1.0));                 // position 0: unchanged
    CHECK(y[1] == approx(0.0));
    CHECK(y[2] == approx(std::cos(1.0)).epsilon(1e-6));  // position 1
    CHECK(y[3] == approx(std::sin(1.0)).epsilon(1e-6));
  }
  RopeShape r;
  r.tokens = 6, r.heads = 3, r.head_dim = 8, r.seq = 3, r.position = 5;  // 2 sequences of 3
  const auto n = static_cast<std::size_t>(r.tokens * r.heads * r.head_dim);
  auto x = random_vec(n, 61);
  std::vector<float> y(n), back(n);
  rope(x.data(), y.data(), r);
  std::vector<double> want(n);
  for (int64_t t = 0; t < r.tokens; ++t)
    for (int64_t h = 0; h < r.heads; ++h)
      for (int64_t i = 0; i < r.head_dim / 2; ++i) {
        const double pos = static_cast<double>(r.position + t % r.seq);
        const double ang = pos * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(r.head_dim));
        const auto base = static_cast<std::size_t>((t * r.heads + h) * r.head_dim);
        const double a = x[base + static_cast<std::size_t>(i)], b = x[base + static_cast<std::size_t>(i + r.head_dim / 2)];
        want[base + static_cast<std::size_t>(i)] = a * std::cos(ang) - b * std::sin(ang);
        want[base + static_cast<std::size_t>(i + r.head_dim / 2)] = b * std::cos(ang) + a * std::sin(ang);
      }
  CHECK(rel_err(y, want) < 1e-5);
  rope_bwd(y.data(), back.data(), r);
  CHECK(rel_err(back, x) < 1e-5);  // a rotation's inverse
  // Gradient of Σ w ⊙ rope(x) is rope_bwd(w).
  const auto w = random_vec(n, 62);
  std::vector<float> dx(n);
  rope_bwd(w.data(), dx.data(), r);
  auto loss = [&] {
    rope(x.data(), y.data(), r);
    return weighted_sum(w, y);
  };
  CHECK(rel_err(dx, numeric_grad(&x, loss)) < fd_tol);
}
