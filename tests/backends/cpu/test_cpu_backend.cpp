// The CPU backend as a whole: a hand-built graph's measured peak equals the schedule peak
// worked out by hand (and the memory model's), transient GEMM workspace is counted, values
// flow through the op dispatch correctly, unsupported ops are reported, and the registry
// creates backends by name.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "approx.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/registry.hpp"
#include "backends/common/timed_runs.hpp"
#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::cpu::test;

namespace {

struct SmallGraph {
  Graph g;
  int x = -1, w = -1, gamma = -1, a = -1, b = -1, c = -1, d = -1;
};

// x[16,64] · w[64,32] -> a; gelu(a) -> b; a + b -> c; rmsnorm(c, gamma) -> d.
SmallGraph small_graph(DType t) {
  SmallGraph s;
  auto tensor = [&](const char* name, std::vector<int64_t> shape, TensorRole role) {
    Tensor x;
    x.name = name;
    x.shape = std::move(shape);
    x.dtype = t;
    x.role = role;
    return s.g.add_tensor(std::move(x));
  };
  auto op = [&](OpKind k, const char* name, std::vector<int> in, std::vector<int> out, OpAttrs at) {
    Op o;
    o.kind = k;
    o.name = name;
    o.dtype = t;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.attrs = std::move(at);
    s.g.add_op(std::move(o));
  };
  s.x = tensor("x", {16, 64}, TensorRole::input);
  s.w = tensor("fc.weight", {64, 32}, TensorRole::weight);
  s.gamma = tensor("norm.weight", {32}, TensorRole::weight);
  s.a = tensor("fc.out", {16, 32}, TensorRole::activation);
  s.b = tensor("gelu.out", {16, 32}, TensorRole::activation);
  s.c = tensor("residual.out", {16, 32}, TensorRole::activation);
  s.d = tensor("norm.out", {16, 32}, TensorRole::activation);
  OpAttrs mm;
  mm.m = 16, mm.n = 32, mm.k = 64;
  op(OpKind::gemm, "fc", {s.x, s.w}, {s.a}, mm);
  OpAttrs pw;
  pw.elements = 16 * 32;
  op(OpKind::gelu, "gelu", {s.a}, {s.b}, pw);
  op(OpKind::residual_add, "residual", {s.a, s.b}, {s.c}, pw);
  OpAttrs nm;
  nm.rows = 16, nm.cols = 32;
  op(OpKind::rmsnorm, "norm", {s.c, s.gamma}, {s.d}, nm);
  return s;
}

RunOptions quick() {
  RunOptions o;
  o.warmup = 1;
  o.repeats = 3;
  return o;
}

}  // namespace

TEST_CASE("cpu backend: measured peak equals the schedule worked out by hand") {
  SmallGraph s = small_graph(DType::fp32);
  cpu::CpuBackend be;
  const Measurement m = be.run(s.g, quick());
  // Persistent: w 64·32·4 = 8192, gamma 128, x 16·64·4 = 4096 -> 12416 bytes.
  // Activations of 16·32·4 = 2048 bytes: a (ops 0-2), b (1-2), c (2-3), d (3).
  // During op 2, a, b and c are live: 12416 + 3·2048 = 18560.
  CHECK(m.peak_bytes == 18560);
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::weight) == 8320);
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::input) == 4096);
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::activation) == 6144);
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::gradient) == 0);
  const MemoryBreakdown predicted = predict_memory(s.g, false);
  CHECK(m.peak_bytes == predicted.peak);
  for (TensorRole r : all_tensor_roles) CHECK(m.bytes_by_role_at_peak.at(r) == predicted.by_role.at(r));

  REQUIRE(m.ops.size() == 4);
  double sum = 0;
  for (const OpMeasurement& om : m.ops) {
    CHECK(om.executed);
    CHECK(om.median > 0);
    CHECK(om.min <= om.median);
    sum += om.median;
  }
  CHECK(m.step_time == approx(sum));
  CHECK(m.time_by_class.at(OpClass::gemm) == approx(m.ops[0].median));
  CHECK(m.time_by_class.at(OpClass::pointwise) == approx(m.ops[1].median + m.ops[2].median));
  CHECK(m.time_by_class.count(OpClass::attention) == 0);
  CHECK(m.executed_wall > 0);
  CHECK(m.backend == "cpu");
  CHECK(m.warmup == 1);
  CHECK(m.repeats == 3);
}

TEST_CASE("cpu backend: repeats do not grow memory; op counts scale the step time") {
  SmallGraph s = small_graph(DType::fp32);
  for (Op& op : s.g.ops) op.count = 4;  // as if 4 of these ops stood for each one built
  cpu::CpuBackend be;
  RunOptions many = quick();
  many.repeats = 7;
  const Measurement m = be.run(s.g, many);
  CHECK(m.peak_bytes == 18560);
  double sum = 0;
  for (const OpMeasurement& om : m.ops) sum += om.median * 4;
  CHECK(m.step_time == approx(sum));
}

TEST_CASE("timed runs: exactly `repeats` without a min_time; with one, more until it has passed") {
  TimedRuns fixed(3, 0);
  while (fixed.next()) {
  }
  CHECK(fixed.count() == 3);
  TimedRuns zero(0, 0);  // at least one run
  while (zero.next()) {
  }
  CHECK(zero.count() == 1);

  TimedRuns timed(2, 0.02);
  const auto start = std::chrono::steady_clock::now();
  while (timed.next()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(timed.count() > 2);
  CHECK(spent >= 0.02);
  CHECK(timed.count() <= max_timed_runs);

  TimedRuns capped(1, 3600);  // the cap ends it long before the time
  while (capped.next()) {
  }
  CHECK(capped.count() == max_timed_runs);
}

TEST_CASE("cpu backend: min_time adds timed runs and reports how many ran") {
  SmallGraph s = small_graph(DType::fp32);
  cpu::CpuBackend be;
  RunOptions o = quick();
  o.repeats = 2;
  o.min_time = 0.002;  // runs of this graph take µs: many runs, or the cap
  const auto start = std::chrono::steady_clock::now();
  const Measurement m = be.run(s.g, o);
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(m.repeats > 2);
  CHECK(m.repeats <= max_timed_runs);
  CHECK((spent >= 0.002 || m.repeats == max_timed_runs));
  CHECK(m.peak_bytes == 18560);
}

TEST_CASE("cpu backend: bf16 GEMM workspace is transient workspace memory, as the model plans it") {
  SmallGraph s = small_graph(DType::bf16);
  cpu::CpuBackend be;
  const Measurement m = be.run(s.g, quick());
  // Persistent halves to 6208 bytes. During the gemm: a (16·32·2 = 1024) plus the fp32
  // workspace: A block 16·64 + B block 64·32 + C block 16·32 = 3584 floats = 14336 bytes.
  CHECK(m.peak_bytes == 6208 + 1024 + 14336);
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::activation) == 1024);
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::workspace) == 14336);
  // A CPU profile plans the same scratch; without a profile the model knows no workspace.
  Hardware cpu;
  cpu.kind = "cpu";
  const MemoryBreakdown pred = predict_memory(s.g, cpu, false);
  CHECK(pred.peak == m.peak_bytes);
  CHECK(pred.by_role.at(TensorRole::workspace) == 14336);
  CHECK(predict_memory(s.g, false).peak == 6208 + 3 * 1024);
}

TEST_CASE("cpu backend: evaluate returns the values the dispatched kernels compute") {
  SmallGraph s = small_graph(DType::fp32);
  cpu::CpuBackend be;
  const auto v = be.evaluate(s.g, 7, {s.x, s.w, s.gamma, s.d});
  const auto& x = v[0];
  const auto& w = v[1];
  CHECK(v[2] == std::vector<float>(32, 1.0f));  // norm gains start at 1
  // Weights ~ N(0, 0.02): the sample standard deviation of 2048 draws is close to 0.02.
  const double sq = std::inner_product(w.begin(), w.end(), w.begin(), 0.0);
  CHECK(std::sqrt(sq / static_cast<double>(w.size())) == approx(0.02).epsilon(0.1));
  std::vector<double> want(16 * 32);
  for (int r = 0; r < 16; ++r) {
    double ss = 0;
    std::vector<double> c(32);
    for (int j = 0; j < 32; ++j) {
      double a = 0;
      for (int k = 0; k < 64; ++k) a += double(x[static_cast<std::size_t>(r * 64 + k)]) * w[static_cast<std::size_t>(k * 32 + j)];
      const double gl = 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
      c[static_cast<std::size_t>(j)] = a + gl;
      ss += c[static_cast<std::size_t>(j)] * c[static_cast<std::size_t>(j)];
    }
    const double rstd = 1 / std::sqrt(ss / 32 + 1e-5);
    for (int j = 0; j < 32; ++j) want[static_cast<std::size_t>(r * 32 + j)] = c[static_cast<std::size_t>(j)] * rstd;
  }
  CHECK(rel_err(v[3], want) < 1e-5);
  // Same seed, same values; another seed, others.
  CHECK(be.evaluate(s.g, 7, {s.d})[0] == v[3]);
  CHECK(be.evaluate(s.g, 8, {s.d})[0] != v[3]);
}

TEST_CASE("cpu backend: operands stored unlike the op are converted (and counted)") {
  SmallGraph s = small_graph(DType::bf16);
  s.g.tensor(s.gamma).dtype = DType::fp32;  // an fp32 gain feeding a bf16 norm
  cpu::CpuBackend be;
  const auto v = be.evaluate(s.g, 3, {s.c, s.d});
  std::vector<cpu::bf16> c = to_storage<cpu::bf16>(v[0]), d(c.size());
  const std::vector<cpu::bf16> gamma(32, cpu::bf16(1.0f));
  cpu::rmsnorm(c.data(), gamma.data(), d.data(), 16, 32, 1e-5f);
  CHECK(v[1] == to_floats(d));
}

TEST_CASE("cpu backend: unsupported ops are reported before running") {
  SmallGraph s = small_graph(DType::fp32);
  cpu::CpuBackend be;
  CHECK(be.unsupported_reason(s.g.ops[0], s.g).empty());
  CHECK(graph_unsupported_reason(be, s.g).empty());
  s.g.ops[0].dtype = DType::fp8;
  CHECK(be.unsupported_reason(s.g.ops[0], s.g) == "cpu backend has no fp8 GEMM");
  CHECK_THROWS_WITH_AS((void)be.run(s.g, quick()), "cpu backend has no fp8 GEMM", NotExecutable);
  s.g.ops[0].dtype = DType::fp32;
  s.g.tensor(s.w).dtype = DType::fp8;  // fp8 weights need an fp8 GEMM too
  CHECK(be.unsupported_reason(s.g.ops[0], s.g) == "cpu backend has no fp8 GEMM");

  Op coll;
  coll.kind = OpKind::collective;
  coll.name = "all_reduce";
  CHECK(be.unsupported_reason(coll, s.g) ==
        "cpu backend runs one device here: collectives need ranks (mpirun, --gpus)");
  Op host;
  host.kind = OpKind::host;
  host.name = "sampling";
  CHECK(be.unsupported_reason(host, s.g).find("host") != std::string::npos);
}

TEST_CASE("cpu backend: inconsistent shapes are refused naming the op") {
  SmallGraph s = small_graph(DType::fp32);
  s.g.ops[0].attrs.k = 63;
  cpu::CpuBackend be;
  CHECK_THROWS_WITH_AS((void)be.run(s.g, quick()), doctest::Contains("op 'fc' (gemm)"), NotExecutable);
  SmallGraph t = small_graph(DType::fp32);
  t.g.ops[3].inputs.pop_back();  // rmsnorm without gamma
  CHECK_THROWS_WITH_AS((void)be.run(t.g, quick()), doctest::Contains("op 'norm' (rmsnorm)"), NotExecutable);
}

TEST_CASE("cpu backend: device description") {
  const DeviceInfo d = cpu::CpuBackend().device();
  CHECK(d.backend == "cpu");
  CHECK(d.catalog_name == "host-cpu");
  CHECK(d.name.find(" threads)") != std::string::npos);
  CHECK(d.compute_units >= 1);
  CHECK(d.memory_bytes > 0);
}

TEST_CASE("cpu registry: backends by name, with suggestions") {
  CHECK(make_backend("cpu")->name() == "cpu");
  CHECK(make_backend("CPU")->name() == "cpu");
  const auto compiled = compiled_backends();
  CHECK(compiled.front() == "cpu");
  const bool has_cuda = std::find(compiled.begin(), compiled.end(), "cuda") != compiled.end();
  if (!has_cuda) {
    CHECK(make_backend("auto")->name() == "cpu");
    CHECK_THROWS_WITH_AS((void)make_backend("cuda"), "this perfsim was built without CUDA (backends: cpu)",
                         ConfigError);
  }
  CHECK_THROWS_WITH_AS((void)make_backend("cpx"), doctest::Contains("did you mean 'cpu'"), ConfigError);
  CHECK_THROWS_WITH_AS((void)make_backend("tpu"), doctest::Contains("unknown backend 'tpu'"), ConfigError);
}

TEST_CASE("cpu backend: token ids start inside the vocabulary; kernel failures name the op") {
  Graph g;
  auto tensor = [&](const char* name, std::vector<int64_t> shape, TensorRole role, DType t) {
    Tensor x;
    x.name = name;
    x.shape = std::move(shape);
    x.role = role;
    x.dtype = t;
    return g.add_tensor(std::move(x));
  };
  const int ids = tensor("tokens", {40}, TensorRole::input, DType::int32);
  const int table = tensor("embedding.weight", {10, 8}, TensorRole::weight, DType::fp32);
  const int pos = tensor("position_embedding.weight", {20, 8}, TensorRole::weight, DType::fp32);
  const int x = tensor("embedding.out", {40, 8}, TensorRole::activation, DType::fp32);
  Op op;
  op.kind = OpKind::embedding;
  op.name = "embedding";
  op.inputs = {ids, table, pos};
  op.outputs = {x};
  op.attrs.seq_q = 20;  // two sequences of 20 at positions 0..19
  g.add_op(op);
  cpu::CpuBackend be;
  const auto v = be.evaluate(g, 1, {ids});
  for (float id : v[0]) {
    CHECK(id >= 0);
    CHECK(id < 10);
    CHECK(id == std::floor(id));
  }
  g.ops[0].attrs.position = 1;  // the last token of each sequence would need position 20
  CHECK_THROWS_WITH_AS((void)be.run(g, quick()), doctest::Contains("op 'embedding' (embedding) failed"),
                       NotExecutable);
}
