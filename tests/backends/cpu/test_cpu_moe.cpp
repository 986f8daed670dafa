// CPU mixture-of-experts kernels: the router by hand (ties, softmax, slots, drops), every
// kernel against a plain reference on random inputs in the three storages (k = 1 and 2, 8
// experts, odd hidden sizes, capacities that drop tokens), the backward kernels against finite
// differences of route -> dispatch -> combine, bad routings refused, and the ops run as a graph.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "approx.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "core/errors.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim;
using namespace perfsim::cpu;
using namespace perfsim::cpu::test;
using perfsim::test::approx;

namespace {

std::size_t at(int64_t i) { return static_cast<std::size_t>(i); }

// The router written out: a stable sort of each row by descending logit (ties keep the lower
// expert first), softmax in double over the top k, slots counted in choice order.
struct Routing {
  std::vector<double> weights;
  std::vector<int32_t> experts, slots;
};

Routing reference_route(const std::vector<float>& logits, const MoeShape& s) {
  Routing r;
  std::vector<int64_t> held(at(s.experts), 0);
  for (int64_t t = 0; t < s.tokens; ++t) {
    std::vector<int32_t> order(at(s.experts));
    std::iota(order.begin(), order.end(), 0);
    const float* row = logits.data() + t * s.experts;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    double sum = 0;
    for (int64_t j = 0; j < s.top_k; ++j) sum += std::exp(double(row[order[at(j)]]) - row[order[0]]);
    for (int64_t j = 0; j < s.top_k; ++j) {
      const int32_t e = order[at(j)];
      r.experts.push_back(e);
      r.weights.push_back(std::exp(double(row[e]) - row[order[0]]) / sum);
      int64_t& n = held[at(e)];
      r.slots.push_back(n < s.capacity ? static_cast<int32_t>(n) : -1);
      ++n;
    }
  }
  return r;
}

int64_t dropped(const std::vector<int32_t>& slots) { return std::count(slots.begin(), slots.end(), -1); }

// A routing's row moves in double: xe, dx, y, dye and dweights by their definitions.
struct Moved {
  std::vector<double> xe, dx, y, dye, dweights;
};

Moved reference_moves(const MoeShape& s, const std::vector<int32_t>& experts, const std::vector<int32_t>& slots,
                      const std::vector<float>& weights, const std::vector<float>& x, const std::vector<float>& dxe,
                      const std::vector<float>& ye, const std::vector<float>& dy) {
  const int64_t h = s.hidden, buffer = s.experts * s.capacity * h;
  Moved m{std::vector<double>(at(buffer)), std::vector<double>(at(s.tokens * h)), std::vector<double>(at(s.tokens * h)),
          std::vector<double>(at(buffer)), std::vector<double>(at(s.tokens * s.top_k))};
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t j = 0; j < s.top_k; ++j) {
      const int64_t i = t * s.top_k + j;
      if (slots[at(i)] < 0) continue;
      const int64_t row = (int64_t{experts[at(i)]} * s.capacity + slots[at(i)]) * h;
      for (int64_t c = 0; c < h; ++c) {
        m.xe[at(row + c)] = x[at(t * h + c)];
        m.dx[at(t * h + c)] += dxe[at(row + c)];
        m.y[at(t * h + c)] += double(weights[at(i)]) * ye[at(row + c)];
        m.dye[at(row + c)] = double(weights[at(i)]) * dy[at(t * h + c)];
        m.dweights[at(i)] += double(dy[at(t * h + c)]) * ye[at(row + c)];
      }
    }
  return m;
}

// Runs every kernel in storage T on the same random inputs (rounded to T) and checks them
// against the references.
template <class T>
void check_against_reference(const MoeShape& s, uint64_t seed, bool expect_drops) {
  CAPTURE(s.tokens);
  CAPTURE(s.top_k);
  CAPTURE(s.capacity);
  CAPTURE(s.hidden);
  const int64_t h = s.hidden, buffer = s.experts * s.capacity * h, choices = s.tokens * s.top_k;
  const auto logits = to_storage<T>(random_vec(at(s.tokens * s.experts), seed));
  std::vector<float> weights(at(choices));
  std::vector<int32_t> experts(at(choices)), slots(at(choices));
  moe_route(logits.data(), weights.data(), experts.data(), slots.data(), s);
  const Routing want = reference_route(to_floats(logits), s);
  CHECK(experts == want.experts);
  CHECK(slots == want.slots);
  CHECK(rel_err(weights, want.weights) < 1e-6);
  if (expect_drops) CHECK(dropped(slots) > 0);

  const auto x = to_storage<T>(random_vec(at(s.tokens * h), seed + 1));
  const auto dxe = to_storage<T>(random_vec(at(buffer), seed + 2));
  const auto ye = to_storage<T>(random_vec(at(buffer), seed + 3));
  const auto dy = to_storage<T>(random_vec(at(s.tokens * h), seed + 4));
  const Moved m =
      reference_moves(s, experts, slots, weights, to_floats(x), to_floats(dxe), to_floats(ye), to_floats(dy));
  std::vector<T> xe(at(buffer), from_f32<T>(NAN)), dx(at(s.tokens * h), from_f32<T>(NAN));
  std::vector<T> y(at(s.tokens * h), from_f32<T>(NAN)), dye(at(buffer), from_f32<T>(NAN));
  std::vector<float> dweights(at(choices), NAN);
  moe_dispatch(x.data(), experts.data(), slots.data(), xe.data(), s);
  moe_dispatch_bwd(dxe.data(), experts.data(), slots.data(), dx.data(), s);
  moe_combine(ye.data(), experts.data(), slots.data(), weights.data(), y.data(), s);
  moe_combine_bwd(dy.data(), ye.data(), experts.data(), slots.data(), weights.data(), dye.data(), dweights.data(), s);
  CHECK(rel_err(to_floats(xe), m.xe) == 0);  // a copy, unused rows exactly 0
  CHECK(rel_err(to_floats(dx), m.dx) < tolerance<T>());
  CHECK(rel_err(to_floats(y), m.y) < tolerance<T>());
  CHECK(rel_err(to_floats(dye), m.dye) < tolerance<T>());
  CHECK(rel_err(dweights, m.dweights) < (std::is_same_v<T, float> ? 1e-5 : 1e-4));  // fp32 sums of exact products

  // moe_route_bwd: dlogits[t, e_j] = w_j·(dw_j − Σ_i w_i·dw_i).
  const auto dw = random_vec(at(choices), seed + 5);
  std::vector<float> dlogits(at(s.tokens * s.experts), NAN);
  moe_route_bwd(logits.data(), experts.data(), dw.data(), dlogits.data(), s);
  std::vector<double> want_dl(dlogits.size(), 0.0);
  for (int64_t t = 0; t < s.tokens; ++t) {
    double wdw = 0;
    for (int64_t j = 0; j < s.top_k; ++j) wdw += want.weights[at(t * s.top_k + j)] * dw[at(t * s.top_k + j)];
    for (int64_t j = 0; j < s.top_k; ++j) {
      const int64_t i = t * s.top_k + j;
      want_dl[at(t * s.experts + experts[at(i)])] = want.weights[at(i)] * (dw[at(i)] - wdw);
    }
  }
  CHECK(rel_err(dlogits, want_dl) < 1e-5);
}

}  // namespace

TEST_CASE("cpu moe: the router by hand: ties to the lower expert, softmax of the top k, slots and drops") {
  const MoeShape s{.tokens = 3, .experts = 4, .top_k = 2, .capacity = 1, .hidden = 0};
  const std::vector<float> logits{1, 3, 3, 0,   // tie of experts 1 and 2: both picked, 1 first
                                  2, 0, 1, 5,   // 3 then 0
                                  0, 4, 1, 1};  // 1 then the tie 2/3: 2
  std::vector<float> w(6);
  std::vector<int32_t> experts(6), slots(6);
  moe_route(logits.data(), w.data(), experts.data(), slots.data(), s);
  CHECK(experts == std::vector<int32_t>{1, 2, 3, 0, 1, 2});
  // Capacity 1: token 2's experts 1 and 2 already hold token 0's rows.
  CHECK(slots == std::vector<int32_t>{0, 0, 0, 0, -1, -1});
  CHECK(w[0] == approx(0.5));
  CHECK(w[1] == approx(0.5));
  CHECK(w[2] == approx(1 / (1 + std::exp(-3.0))));  // e^5 / (e^5 + e^2)
  CHECK(w[3] == approx(1 / (1 + std::exp(3.0))));
  CHECK(w[4] == approx(1 / (1 + std::exp(-3.0))));
  // With room for two rows, token 2 lands in slot 1 of both.
  moe_route(logits.data(), w.data(), experts.data(), slots.data(), MoeShape{3, 4, 2, 2, 0});
  CHECK(slots == std::vector<int32_t>{0, 0, 0, 0, 1, 1});
}

TEST_CASE_TEMPLATE("cpu moe: every kernel matches the reference", T, float, bf16, half) {
  // 8 experts; k = 2 with 74 choices for 48 rows (drops certain), k = 2 with room to spare,
  // k = 1 with a small capacity; odd and vector-sized hidden sizes.
  check_against_reference<T>(MoeShape{.tokens = 37, .experts = 8, .top_k = 2, .capacity = 6, .hidden = 13}, 11, true);
  check_against_reference<T>(MoeShape{.tokens = 29, .experts = 8, .top_k = 2, .capacity = 29, .hidden = 64}, 21,
                             false);
  check_against_reference<T>(MoeShape{.tokens = 40, .experts = 8, .top_k = 1, .capacity = 3, .hidden = 7}, 31, true);
}

TEST_CASE("cpu moe: backward kernels equal finite differences of route -> dispatch -> combine") {
  // L = Σ g·y, y = combine(dispatch(x)) (identity experts) weighted by route(logits).
  // dL/dx = dispatch_bwd(dye) and dL/dlogits = route_bwd(dweights), dye and dweights from
  // combine_bwd(g). Logits are spaced 0.25 apart, so a step of 1e-2 never reorders the top k.
  const MoeShape s{.tokens = 12, .experts = 8, .top_k = 2, .capacity = 2, .hidden = 5};
  const int64_t h = s.hidden, buffer = s.experts * s.capacity * h, choices = s.tokens * s.top_k;
  std::vector<float> logits(at(s.tokens * s.experts));
  std::mt19937_64 rng(5);
  for (int64_t t = 0; t < s.tokens; ++t) {
    std::vector<int> perm(at(s.experts));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t e = 0; e < s.experts; ++e) logits[at(t * s.experts + e)] = 0.25f * float(perm[at(e)]);
  }
  auto x = random_vec(at(s.tokens * h), 6);
  const auto g = random_vec(at(s.tokens * h), 7);

  std::vector<float> w(at(choices)), xe(at(buffer)), y(at(s.tokens * h));
  std::vector<int32_t> experts(at(choices)), slots(at(choices));
  auto loss = [&] {
    moe_route(logits.data(), w.data(), experts.data(), slots.data(), s);
    moe_dispatch(x.data(), experts.data(), slots.data(), xe.data(), s);
    moe_combine(xe.data(), experts.data(), slots.data(), w.data(), y.data(), s);
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += double(g[i]) * y[i];
    return l;
  };
  (void)loss();
  REQUIRE(dropped(slots) > 0);  // 24 choices for 16 rows
  std::vector<float> dye(at(buffer)), dweights(at(choices)), dx(at(s.tokens * h)), dlogits(logits.size());
  moe_combine_bwd(g.data(), xe.data(), experts.data(), slots.data(), w.data(), dye.data(), dweights.data(), s);
  moe_dispatch_bwd(dye.data(), experts.data(), slots.data(), dx.data(), s);
  moe_route_bwd(logits.data(), experts.data(), dweights.data(), dlogits.data(), s);

  const std::vector<int32_t> routed = experts;
  auto numeric = [&](std::vector<float>& v) {
    std::vector<double> d(v.size());
    constexpr float eps = 1e-2f;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float keep = v[i];
      v[i] = keep + eps;
      const double up = loss();
      v[i] = keep - eps;
      const double down = loss();
      v[i] = keep;
      d[i] = (up - down) / (2.0 * eps);
      REQUIRE(experts == routed);
    }
    return d;
  };
  CHECK(rel_err(dx, numeric(x)) < 1e-3);
  CHECK(rel_err(dlogits, numeric(logits)) < 1e-3);
  // Off the top k the router's gradient is exactly 0.
  auto chosen = [&](int64_t t, int64_t e) {
    const auto first = routed.begin() + t * s.top_k, last = first + s.top_k;
    return std::find(first, last, e) != last;
  };
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t e = 0; e < s.experts; ++e)
      if (!chosen(t, e)) CHECK(dlogits[at(t * s.experts + e)] == 0.0f);
}

TEST_CASE("cpu moe: expert_grad_scale scales the gradient into the experts and back out of them") {
  // Under expert parallelism (1/ep): dye is scaled, dweights are not, and dispatch_bwd of the
  // scaled dye gives the unscaled dx (exactly, for a power of two).
  MoeShape s{.tokens = 12, .experts = 8, .top_k = 2, .capacity = 3, .hidden = 5};
  const int64_t buffer = s.experts * s.capacity * s.hidden, choices = s.tokens * s.top_k, rows = s.tokens * s.hidden;
  const auto logits = random_vec(at(s.tokens * s.experts), 1);
  std::vector<float> w(at(choices));
  std::vector<int32_t> experts(at(choices)), slots(at(choices));
  moe_route(logits.data(), w.data(), experts.data(), slots.data(), s);
  const auto dy = random_vec(at(rows), 2), ye = random_vec(at(buffer), 3);
  auto backward = [&](float scale, std::vector<float>& dye, std::vector<float>& dweights, std::vector<float>& dx) {
    s.expert_grad_scale = scale;
    dye.assign(at(buffer), 0), dweights.assign(at(choices), 0), dx.assign(at(rows), 0);
    moe_combine_bwd(dy.data(), ye.data(), experts.data(), slots.data(), w.data(), dye.data(), dweights.data(), s);
    moe_dispatch_bwd(dye.data(), experts.data(), slots.data(), dx.data(), s);
  };
  std::vector<float> dye1, dw1, dx1, dye4, dw4, dx4;
  backward(1.0f, dye1, dw1, dx1);
  backward(0.25f, dye4, dw4, dx4);
  for (std::size_t i = 0; i < dye1.size(); ++i) CHECK(dye4[i] == 0.25f * dye1[i]);
  CHECK(dw4 == dw1);
  CHECK(dx4 == dx1);
}

TEST_CASE("cpu moe: routings naming an expert or slot out of range, or one row twice, are refused") {
  const MoeShape s{.tokens = 2, .experts = 2, .top_k = 1, .capacity = 2, .hidden = 3};
  const std::vector<float> x(6, 1.0f);
  std::vector<float> xe(12);
  auto dispatch = [&](std::vector<int32_t> experts, std::vector<int32_t> slots) {
    moe_dispatch(x.data(), experts.data(), slots.data(), xe.data(), s);
  };
  CHECK_NOTHROW(dispatch({1, 1}, {1, -1}));
  CHECK_THROWS_AS(dispatch({0, 2}, {0, 0}), std::out_of_range);
  CHECK_THROWS_AS(dispatch({0, -1}, {0, -1}), std::out_of_range);
  CHECK_THROWS_AS(dispatch({0, 1}, {0, 2}), std::out_of_range);
  CHECK_THROWS_AS(dispatch({0, 1}, {-2, 0}), std::out_of_range);
  CHECK_THROWS_WITH_AS(dispatch({1, 1}, {0, 0}), "moe: tokens 0 and 1 both fill slot 0 of expert 1",
                       std::invalid_argument);
}

namespace {

int add_tensor(Graph& g, const char* name, std::vector<int64_t> shape, DType t, TensorRole role) {
  Tensor x;
  x.name = name;
  x.shape = std::move(shape);
  x.dtype = t;
  x.role = role;
  return g.add_tensor(std::move(x));
}

void add_op(Graph& g, OpKind k, const char* name, std::vector<int> in, std::vector<int> out, const OpAttrs& a,
            DType t) {
  Op o;
  o.kind = k;
  o.name = name;
  o.dtype = t;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.attrs = a;
  g.add_op(std::move(o));
}

OpAttrs moe_attrs(int64_t tokens, int64_t cols) {
  OpAttrs a;
  a.experts = 8, a.top_k = 2, a.capacity = 5, a.rows = tokens, a.cols = cols;
  return a;
}

}  // namespace

TEST_CASE("cpu moe: route, dispatch and combine run as a bf16 graph, as the kernels compute them") {
  constexpr int64_t t = 16, e = 8, k = 2, c = 5, h = 9;
  Graph g;
  const int logits = add_tensor(g, "router.out", {t, e}, DType::bf16, TensorRole::input);
  const int x = add_tensor(g, "x", {t, h}, DType::bf16, TensorRole::input);
  const int w = add_tensor(g, "route.weights", {t, k}, DType::fp32, TensorRole::activation);
  const int ex = add_tensor(g, "route.experts", {t, k}, DType::int32, TensorRole::activation);
  const int sl = add_tensor(g, "route.slots", {t, k}, DType::int32, TensorRole::activation);
  const int xe = add_tensor(g, "dispatch.out", {e, c, h}, DType::bf16, TensorRole::activation);
  const int y = add_tensor(g, "combine.out", {t, h}, DType::bf16, TensorRole::activation);
  add_op(g, OpKind::moe_route, "route", {logits}, {w, ex, sl}, moe_attrs(t, e), DType::bf16);
  add_op(g, OpKind::moe_dispatch, "dispatch", {x, ex, sl}, {xe}, moe_attrs(t, h), DType::bf16);
  add_op(g, OpKind::moe_combine, "combine", {xe, ex, sl, w}, {y}, moe_attrs(t, h), DType::bf16);
  cpu::CpuBackend be;
  CHECK(graph_unsupported_reason(be, g).empty());
  const auto v = be.evaluate(g, 3, {logits, x, w, ex, sl, y});

  const MoeShape s{.tokens = t, .experts = e, .top_k = k, .capacity = c, .hidden = h};
  const auto l16 = to_storage<bf16>(v[0]), x16 = to_storage<bf16>(v[1]);
  std::vector<float> want_w(t * k);
  std::vector<int32_t> want_ex(t * k), want_sl(t * k);
  moe_route(l16.data(), want_w.data(), want_ex.data(), want_sl.data(), s);
  std::vector<bf16> want_xe(e * c * h), want_y(t * h);
  moe_dispatch(x16.data(), want_ex.data(), want_sl.data(), want_xe.data(), s);
  moe_combine(want_xe.data(), want_ex.data(), want_sl.data(), want_w.data(), want_y.data(), s);
  CHECK(v[2] == want_w);
  CHECK(v[3] == std::vector<float>(want_ex.begin(), want_ex.end()));
  CHECK(v[4] == std::vector<float>(want_sl.begin(), want_sl.end()));
  CHECK(v[5] == to_floats(want_y));
}

TEST_CASE("cpu moe: routing tensors a graph takes as inputs start as a valid round-robin routing; shapes are checked") {
  constexpr int64_t t = 10, k = 2, h = 4;
  Graph g;
  const int x = add_tensor(g, "x", {t, h}, DType::fp32, TensorRole::input);
  const int ex = add_tensor(g, "experts", {t, k}, DType::int32, TensorRole::input);
  const int sl = add_tensor(g, "slots", {t, k}, DType::int32, TensorRole::input);
  const int xe = add_tensor(g, "dispatch.out", {8, 2, h}, DType::fp32, TensorRole::activation);
  OpAttrs a = moe_attrs(t, h);
  a.capacity = 2;  // 20 choices for 16 rows: the last four dropped
  add_op(g, OpKind::moe_dispatch, "dispatch", {x, ex, sl}, {xe}, a, DType::fp32);
  cpu::CpuBackend be;
  const auto v = be.evaluate(g, 1, {ex, sl});
  for (int64_t i = 0; i < t * k; ++i) {
    CHECK(v[0][at(i)] == float(i % 8));
    CHECK(v[1][at(i)] == (i < 16 ? float(i / 8) : -1.0f));
  }
  RunOptions o;
  o.warmup = 0, o.repeats = 1;
  CHECK_NOTHROW((void)be.run(g, o));
  g.tensor(xe).shape = {8, 3, h};  // a buffer of another capacity than the op's
  CHECK_THROWS_WITH_AS((void)be.run(g, o), doctest::Contains("op 'dispatch' (moe_dispatch)"), NotExecutable);
}
