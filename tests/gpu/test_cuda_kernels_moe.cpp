// CUDA mixture-of-experts kernels against the CPU reference on the same inputs, for fp32,
// bf16 and fp16: the router (identical experts and slots, ties included, more than 32 experts
// and more choices than a scan step), its backward, and the four row moves with odd (scalar
// path) and vector-sized hidden sizes, k = 1 and 2 and capacities that drop tokens. Outputs
// are poisoned first, and a second run must repeat the first bit for bit. Then the six ops as
// a graph on the CUDA backend against the CPU backend, eager and replayed, on planned workspace.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/kernels/moe.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

// Logits rounded to steps of 0.5 when `ties` is set, so that equal logits compete for the top k.
template <class H>
std::vector<H> router_logits(int64_t n, uint32_t seed, bool ties) {
  auto v = random_values<float>(n, seed, -2.0f, 2.0f);
  if (ties)
    for (float& x : v) x = std::round(x * 2.0f) / 2.0f;
  std::vector<H> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = host::from_f32<H>(v[i]);
  return out;
}

template <class H>
bool same_bits(const std::vector<H>& a, const std::vector<H>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(H)) == 0;
}

template <class D>
void check_moe(const ops::MoeShape& s, uint32_t seed, bool ties) {
  using H = host_t<D>;
  CAPTURE(s.tokens);
  CAPTURE(s.experts);
  CAPTURE(s.top_k);
  CAPTURE(s.capacity);
  CAPTURE(s.hidden);
  const int64_t choices = s.tokens * s.top_k, buffer = s.experts * s.capacity * s.hidden, rows = s.tokens * s.hidden;

  // Router: the same picks and slots as the CPU, weights to fp32 rounding.
  const auto logits = router_logits<H>(s.tokens * s.experts, seed, ties);
  std::vector<float> weights(static_cast<size_t>(choices));
  std::vector<int32_t> experts(static_cast<size_t>(choices)), slots(static_cast<size_t>(choices));
  cpu::moe_route(logits.data(), weights.data(), experts.data(), slots.data(), s);
  DeviceBuffer<D> d_logits(logits);
  DeviceBuffer<float> d_weights(choices);
  DeviceBuffer<int32_t> d_experts(choices), d_slots(choices);
  d_weights.poison();
  d_experts.poison();
  d_slots.poison();
  cuda::moe_route(d_logits.get(), d_weights.get(), d_experts.get(), d_slots.get(), s, nullptr);
  const auto got_weights = d_weights.download();
  CHECK(d_experts.download<int32_t>() == experts);
  CHECK(d_slots.download<int32_t>() == slots);
  CHECK(normalized_error(got_weights, weights) <= 1e-5);
  cuda::moe_route(d_logits.get(), d_weights.get(), d_experts.get(), d_slots.get(), s, nullptr);
  CHECK(same_bits(d_weights.download(), got_weights));

  const auto dw = random_values<float>(choices, seed + 1);
  DeviceBuffer<float> d_dw(dw), d_dlogits(s.tokens * s.experts);
  std::vector<float> dlogits(static_cast<size_t>(s.tokens * s.experts));
  d_dlogits.poison();
  cuda::moe_route_bwd(d_logits.get(), d_experts.get(), d_dw.get(), d_dlogits.get(), s, nullptr);
  cpu::moe_route_bwd(logits.data(), experts.data(), dw.data(), dlogits.data(), s);
  CHECK(normalized_error(d_dlogits.download(), dlogits) <= 1e-5);

  // Row moves, on the CPU's routing (equal to the GPU's, checked above).
  d_weights.upload(weights);
  const auto x = random_values<H>(rows, seed + 2), dy = random_values<H>(rows, seed + 3);
  const auto ye = random_values<H>(buffer, seed + 4);
  DeviceBuffer<D> d_x(x), d_dy(dy), d_ye(ye), d_xe(buffer), d_out(rows), d_dye(buffer);
  DeviceBuffer<float> d_dweights(choices);
  std::vector<H> xe(static_cast<size_t>(buffer)), out(static_cast<size_t>(rows)), dye(static_cast<size_t>(buffer));
  std::vector<float> dweights(static_cast<size_t>(choices));

  d_xe.poison();
  cuda::moe_dispatch(d_x.get(), d_experts.get(), d_slots.get(), d_xe.get(), s, nullptr);
  cpu::moe_dispatch(x.data(), experts.data(), slots.data(), xe.data(), s);
  CHECK(same_bits(d_xe.download(), xe));  // a copy; unused rows 0

  d_out.poison();
  cuda::moe_dispatch_bwd(d_ye.get(), d_experts.get(), d_slots.get(), d_out.get(), s, nullptr);
  cpu::moe_dispatch_bwd(ye.data(), experts.data(), slots.data(), out.data(), s);
  CHECK(normalized_error(d_out.download(), out) <= tolerance<D>());

  d_out.poison();
  cuda::moe_combine(d_ye.get(), d_experts.get(), d_slots.get(), d_weights.get(), d_out.get(), s, nullptr);
  cpu::moe_combine(ye.data(), experts.data(), slots.data(), weights.data(), out.data(), s);
  CHECK(normalized_error(d_out.download(), out) <= tolerance<D>());

  d_dye.poison();
  d_dweights.poison();
  cuda::moe_combine_bwd(d_dy.get(), d_ye.get(), d_experts.get(), d_slots.get(), d_weights.get(), d_dye.get(),
                        d_dweights.get(), s, nullptr);
  cpu::moe_combine_bwd(dy.data(), ye.data(), experts.data(), slots.data(), weights.data(), dye.data(), dweights.data(),
                       s);
  const auto got_dye = d_dye.download();
  const auto got_dweights = d_dweights.download();
  CHECK(normalized_error(got_dye, dye) <= tolerance<D>());
  CHECK(normalized_error(got_dweights, dweights) <= 1e-4);  // fp32 sums of h products, another order
  cuda::moe_combine_bwd(d_dy.get(), d_ye.get(), d_experts.get(), d_slots.get(), d_weights.get(), d_dye.get(),
                        d_dweights.get(), s, nullptr);
  CHECK(same_bits(d_dye.download(), got_dye));
  CHECK(same_bits(d_dweights.download(), got_dweights));
}

}  // namespace

TEST_CASE_TEMPLATE("cuda kernels: mixture-of-experts routing and row moves match the CPU reference", D, float,
                   __nv_bfloat16, __half) {
  // 8 experts, k = 2, 74 choices for 48 rows (drops), tied logits, odd h: the scalar path.
  check_moe<D>(ops::MoeShape{.tokens = 37, .experts = 8, .top_k = 2, .capacity = 6, .hidden = 13}, 41, true);
  // k = 1, small capacity, odd h.
  check_moe<D>(ops::MoeShape{.tokens = 40, .experts = 8, .top_k = 1, .capacity = 3, .hidden = 7}, 42, false);
  // Room for every token, 16-byte chunks.
  check_moe<D>(ops::MoeShape{.tokens = 300, .experts = 8, .top_k = 2, .capacity = 80, .hidden = 64}, 43, false);
  // 64 experts (two mask words per lane), 2800 choices (several scan steps), k = 4, some drops.
  check_moe<D>(ops::MoeShape{.tokens = 700, .experts = 64, .top_k = 4, .capacity = 48, .hidden = 128}, 44, true);
  // Expert parallelism's gradient scale (1/ep) into the experts and back out, both paths.
  check_moe<D>(ops::MoeShape{.tokens = 37, .experts = 8, .top_k = 2, .capacity = 6, .hidden = 13,
                             .expert_grad_scale = 0.5f},
               45, false);
  check_moe<D>(ops::MoeShape{.tokens = 300, .experts = 8, .top_k = 2, .capacity = 80, .hidden = 64,
                             .expert_grad_scale = 0.25f},
               46, false);
}

namespace {

// route -> dispatch -> combine (identity experts: ye = xe), then combine_bwd, dispatch_bwd and
// route_bwd from an upstream dy. 48 tokens at k = 2 for 8 experts of 10 rows: some dropped.
struct MoeGraph {
  Graph g;
  std::vector<int> results;  // weights, experts, slots, y, dweights, dx, dlogits
};

MoeGraph moe_graph(DType t) {
  constexpr int64_t tokens = 48, experts = 8, k = 2, capacity = 10, h = 64;
  MoeGraph m;
  auto tensor = [&](const char* name, std::vector<int64_t> shape, DType dt, TensorRole role) {
    Tensor x;
    x.name = name;
    x.shape = std::move(shape);
    x.dtype = dt;
    x.role = role;
    return m.g.add_tensor(std::move(x));
  };
  auto op = [&](OpKind kind, const char* name, std::vector<int> in, std::vector<int> out, int64_t cols) {
    Op o;
    o.kind = kind;
    o.name = name;
    o.dtype = t;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.attrs.experts = experts, o.attrs.top_k = k, o.attrs.capacity = capacity;
    o.attrs.rows = tokens, o.attrs.cols = cols;
    m.g.add_op(std::move(o));
  };
  const int logits = tensor("router.out", {tokens, experts}, t, TensorRole::input);
  const int x = tensor("x", {tokens, h}, t, TensorRole::input);
  const int dy = tensor("dy", {tokens, h}, t, TensorRole::input);
  const int w = tensor("route.weights", {tokens, k}, DType::fp32, TensorRole::activation);
  const int ex = tensor("route.experts", {tokens, k}, DType::int32, TensorRole::activation);
  const int sl = tensor("route.slots", {tokens, k}, DType::int32, TensorRole::activation);
  const int xe = tensor("dispatch.out", {experts, capacity, h}, t, TensorRole::activation);
  const int y = tensor("combine.out", {tokens, h}, t, TensorRole::activation);
  const int dye = tensor("combine_bwd.dye", {experts, capacity, h}, t, TensorRole::activation);
  const int dw = tensor("combine_bwd.dweights", {tokens, k}, DType::fp32, TensorRole::activation);
  const int dx = tensor("dispatch_bwd.out", {tokens, h}, t, TensorRole::activation);
  const int dl = tensor("route_bwd.out", {tokens, experts}, DType::fp32, TensorRole::activation);
  op(OpKind::moe_route, "route", {logits}, {w, ex, sl}, experts);
  op(OpKind::moe_dispatch, "dispatch", {x, ex, sl}, {xe}, h);
  op(OpKind::moe_combine, "combine", {xe, ex, sl, w}, {y}, h);
  op(OpKind::moe_combine_bwd, "combine_bwd", {dy, xe, ex, sl, w}, {dye, dw}, h);
  op(OpKind::moe_dispatch_bwd, "dispatch_bwd", {dye, ex, sl}, {dx}, h);
  op(OpKind::moe_route_bwd, "route_bwd", {logits, ex, dw}, {dl}, experts);
  m.results = {w, ex, sl, y, dw, dx, dl};
  return m;
}

}  // namespace

TEST_CASE("cuda backend: a mixture-of-experts forward and backward graph matches the CPU backend") {
  for (DType t : {DType::fp32, DType::bf16}) {
    CAPTURE(name_of(t));
    MoeGraph m = moe_graph(t);
    const auto want = cpu::CpuBackend().evaluate(m.g, 5, m.results);
    cuda::CudaBackend be;
    const auto eager = be.evaluate(m.g, 5, m.results);
    m.g.graphed = true;
    const auto replayed = be.evaluate(m.g, 5, m.results);
    const double tol = t == DType::fp32 ? 1e-5 : 1e-2;
    for (std::size_t i = 0; i < m.results.size(); ++i) {
      CAPTURE(m.g.tensor(m.results[i]).name);
      CHECK(normalized_error(eager[i], want[i]) <= (i < 3 ? 1e-5 : tol));
      CHECK(replayed[i] == eager[i]);
    }
    CHECK(eager[1] == want[1]);  // the same experts
    CHECK(eager[2] == want[2]);  // and slots, drops included
    CHECK(std::count(want[2].begin(), want[2].end(), -1.0f) > 0);

    // The kernels carve exactly the workspace the cost model plans (staging only).
    m.g.graphed = false;
    cuda::CachingAllocator alloc;
    cuda::GemmEngine gemm;
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    {
      cuda::GraphRunner runner(m.g, 5, alloc, gemm, stream);
      (void)runner.run_once();
      for (const std::string& bad : runner.workspace_mismatches()) FAIL_CHECK(bad);
    }
    (void)cudaStreamDestroy(stream);
  }
}
