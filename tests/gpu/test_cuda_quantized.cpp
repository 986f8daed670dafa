// GEMMs on quantized weights on the GPU (cuda_quantized_gemm.hpp): the fused dequantizing GEMV
// (slices of K, group boundaries inside a warp's rows, a partial last CTA of columns), the
// dequantization to floats (vector and scalar paths) and W8A8's row quantization and int8
// product, each against the host reference of backends/common/quantized_weights.hpp; then
// decode and prefill steps of a tiny model with int4, int8 and W8A8 weights against the CPU
// backend, eager and replayed, with the memory the model plans.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "backends/common/quantized_weights.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "backends/cuda/cuda_quantized_gemm.hpp"
#include "core/cost/kernel_paths.hpp"
#include "core/cost/memory_model.hpp"
#include "core/passes/passes.hpp"
#include "gpu_test_util.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::cuda;
using namespace perfsim::cuda::test;

namespace {

struct HostWeight {
  host::QuantLayout q;
  std::vector<uint8_t> data;
  std::vector<float> dense;  // [K, N], dequantized
};

HostWeight make_weight(int64_t k, int64_t n, int64_t group, bool int4, uint64_t seed) {
  HostWeight w;
  w.q.k = k, w.q.n = n, w.q.group = group, w.q.int4 = int4, w.q.zeros = int4;
  w.data.resize(w.q.bytes());
  host::fill_quantized(w.data.data(), w.q, seed);
  w.dense.resize(static_cast<std::size_t>(k * n));
  host::dequantize(w.data.data(), w.q, w.dense.data());
  return w;
}

QuantWeightView view(const HostWeight& w, const DeviceBuffer& d) {
  QuantWeightView v;
  v.data = d.get();
  v.k = w.q.k, v.n = w.q.n, v.group = w.q.group, v.int4 = w.q.int4, v.zeros = w.q.zeros;
  v.scale_offset = w.q.scale_offset(), v.zero_offset = w.q.zero_offset();
  return v;
}

// out [m, n] = a [m, k] · dense [k, n] in double.
std::vector<float> reference(const std::vector<float>& a, int64_t m, const HostWeight& w) {
  std::vector<float> out(static_cast<std::size_t>(m * w.q.n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < w.q.n; ++j) {
      double s = 0;
      for (int64_t kk = 0; kk < w.q.k; ++kk)
        s += static_cast<double>(a[static_cast<std::size_t>(i * w.q.k + kk)]) * w.dense[static_cast<std::size_t>(kk * w.q.n + j)];
      out[static_cast<std::size_t>(i * w.q.n + j)] = static_cast<float>(s);
    }
  return out;
}

ModelConfig tiny() {
  ModelConfig m = test_models::tiny_llama();
  m.layers = 2;
  m.vocab = 128;  // lm_head's columns a multiple of 8: the fused kernel takes it too
  return m;
}

Graph step(Phase phase, int64_t batch, const std::vector<std::string>& passes) {
  Workload w;
  w.phase = phase;
  w.batch = batch, w.prompt = 6, w.new_tokens = 4;
  std::vector<StackStep> stack{{"step", {}}};
  for (const auto& p : passes) stack[0].passes.push_back(PassSpec{p, std::nullopt});
  return build_stack_graph(tiny(), w, stack, 0);
}

}  // namespace

TEST_CASE("cuda quantized: the fused GEMV matches the host product over slices and groups") {
  // 800 columns: three whole CTAs and a partial one; groups of 32, 40 and 128; 1, 3 and 8
  // rows; the planned slices, 1 and 16 (a cluster of 16, some slices empty); C written in
  // fp32, and in bf16 onto what it holds. The int4 sums pass through 1 + q/128 (widen in
  // kernels/quantized_gemm.cu): a few ulps more than the host's product, far under bf16's.
  for (const bool int4 : {true, false})
    for (const int64_t group : {int64_t{32}, int64_t{40}, int64_t{128}})
      for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}}) {
        CAPTURE(int4);
        CAPTURE(group);
        CAPTURE(m);
        const int64_t k = 1280, n = 800;
        const HostWeight w = make_weight(k, n, group, int4, 31 + static_cast<uint64_t>(m));
        const DeviceBuffer dw = to_device(w.data);
        const QuantWeightView v = view(w, dw);
        REQUIRE(quantized_gemv_fits(v, m));
        const auto a = rounded<host::bf16>(random_vec(static_cast<std::size_t>(m * k), 7, 1.0f));
        const DeviceBuffer da = to_device(to_storage<host::bf16>(a));
        const std::vector<float> want = reference(a, m, w);
        for (const int64_t splits : {quantized_gemv_splits_here(n, k), int64_t{1}, int64_t{16}}) {
          CAPTURE(splits);
          DeviceBuffer c = poisoned<float>(static_cast<std::size_t>(m * n));
          quantized_gemv(da.get(), Elem::bf16, m, v, splits, c.get(), Elem::f32, false, nullptr);
          CHECK(rel_err(from_device<float>(c, static_cast<std::size_t>(m * n)), want) < 1e-4);
        }
        const auto c0 = rounded<host::bf16>(random_vec(static_cast<std::size_t>(m * n), 3, 0.1f));
        const DeviceBuffer dc = to_device(to_storage<host::bf16>(c0));
        quantized_gemv(da.get(), Elem::bf16, m, v, 4, dc.get(), Elem::bf16, true, nullptr);
        std::vector<float> sum = want;
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += c0[i];
        CHECK(rel_err(to_floats(from_device<host::bf16>(dc, sum.size())), sum) < 1e-2);
      }
  // Groups of 20 are not whole batches of 8 rows: the GEMM dequantizes first.
  const HostWeight odd = make_weight(1280, 800, 20, true, 3);
  const DeviceBuffer dodd = to_device(odd.data);
  CHECK_FALSE(quantized_gemv_fits(view(odd, dodd), 1));
  CHECK(quantized_gemv_splits(4096, 4096, 132) == 16);  // 16 tiles of 256 columns
  CHECK(quantized_gemv_splits(128256, 4096, 132) == 1);  // lm_head: 501 tiles already
}

TEST_CASE("cuda quantized: dequantization matches the host's, vector and scalar paths") {
  for (const bool int4 : {true, false})
    for (const int64_t n : {int64_t{264}, int64_t{262}}) {  // 262: not a multiple of 8 (scalar path)
      CAPTURE(int4);
      CAPTURE(n);
      const HostWeight w = make_weight(96, n, 32, int4, 5);
      const DeviceBuffer dw = to_device(w.data);
      DeviceBuffer out = poisoned<float>(w.dense.size());
      dequantize_weight(view(w, dw), out.get(), Elem::f32, nullptr);
      CHECK(from_device<float>(out, w.dense.size()) == w.dense);
      DeviceBuffer half = poisoned<host::bf16>(w.dense.size());
      dequantize_weight(view(w, dw), half.get(), Elem::bf16, nullptr);
      CHECK(rel_err(to_floats(from_device<host::bf16>(half, w.dense.size())), w.dense) < 1e-2);
    }
}

TEST_CASE("cuda quantized: W8A8 rows quantize as the host's and the int8 product scales back") {
  const int64_t m = 5, k = 256, n = 192;
  auto a = random_vec(static_cast<std::size_t>(m * k), 9, 3.0f);
  for (int64_t j = 0; j < k; ++j) a[static_cast<std::size_t>(2 * k + j)] = 0.0f;  // a zero row
  const DeviceBuffer da = to_device(a);
  DeviceBuffer q = poisoned<int8_t>(static_cast<std::size_t>(m * k)), scales = poisoned<float>(static_cast<std::size_t>(m));
  quantize_rows_int8(da.get(), Elem::f32, m, k, q.as<int8_t>(), scales.as<float>(), nullptr);
  const auto got_q = from_device<int8_t>(q, static_cast<std::size_t>(m * k));
  const auto got_s = from_device<float>(scales, static_cast<std::size_t>(m));
  std::vector<float> fake = a;
  host::fake_quantize_rows(fake.data(), m, k);
  std::vector<float> back(fake.size());
  for (std::size_t i = 0; i < back.size(); ++i) back[i] = got_q[i] * got_s[i / static_cast<std::size_t>(k)];
  CHECK(rel_err(back, fake) < 1e-6);
  CHECK(got_s[2] == 0.0f);

  // The weight per channel (group = K), its values stored [N, K] as the backend keeps them.
  const HostWeight w = make_weight(k, n, k, false, 11);
  std::vector<uint8_t> nk(w.data.size());
  Tensor t;
  t.shape = {k, n};
  t.dtype = DType::int8;
  t.quant_group = k;
  transpose_quantized_values(t, w.data.data(), nk.data(), true);
  std::vector<uint8_t> kn(w.data.size());
  transpose_quantized_values(t, nk.data(), kn.data(), false);
  CHECK(kn == w.data);
  const DeviceBuffer dw = to_device(nk);
  DeviceBuffer acc = poisoned<int32_t>(static_cast<std::size_t>(m * n)), c = poisoned<float>(static_cast<std::size_t>(m * n));
  GemmEngine gemm;
  gemm.int8_gemm(q.as<int8_t>(), dw.as<int8_t>(), acc.as<int32_t>(), m, n, k, nullptr);
  scale_int8_product(acc.as<int32_t>(), scales.as<float>(), dw.as<char>() + w.q.scale_offset(), m, n, c.get(),
                     Elem::f32, false, nullptr);
  CHECK(rel_err(from_device<float>(c, static_cast<std::size_t>(m * n)), reference(fake, m, w)) < 1e-5);
  CHECK_FALSE(GemmEngine::int8_unsupported(1, 100, 30).empty());
}

TEST_CASE("cuda quantized: decode and prefill steps match the CPU backend, eager and replayed") {
  for (const char* format : {"int4_weights", "int8_weights", "w8a8"})
    for (const Phase phase : {Phase::decode, Phase::prefill}) {
      CAPTURE(format);
      CAPTURE(static_cast<int>(phase));
      // Decode: 3 rows per GEMM (the fused path, W8A8's int8 GEMM); prefill: 12 (dequantized first).
      Graph g = step(phase, phase == Phase::decode ? 3 : 2, {"bf16", "flash_attention", format});
      const int logits = g.ops.back().outputs.at(0);
      const auto want = cpu::CpuBackend().evaluate(g, 7, {logits});
      CudaBackend be;
      const auto eager = be.evaluate(g, 7, {logits});
      CHECK(rel_err(eager[0], want[0]) < 2e-2);
      g.graphed = true;
      const auto replayed = be.evaluate(g, 7, {logits});
      CHECK(rel_err(replayed[0], eager[0]) < 1e-6);
      RunOptions o;
      o.warmup = 1, o.repeats = 2;
      const Measurement m = be.run(g, o);
      const MemoryBreakdown pred = predict_memory(g, device_profile(0), false);
      // The quantized weights' bytes (values, scales, zeros) and the planned workspace.
      CHECK(m.bytes_by_role_at_peak.at(TensorRole::weight) == pred.by_role.at(TensorRole::weight));
      CHECK(m.bytes_by_role_at_peak.at(TensorRole::workspace) == pred.by_role.at(TensorRole::workspace));
      CHECK(m.peak_bytes == pred.peak);
    }
}

TEST_CASE("cuda quantized: a weight read back is the weight it stands for") {
  const Graph g = step(Phase::decode, 1, {"bf16", "w8a8"});
  int id = -1;
  for (const Tensor& t : g.tensors)
    if (t.quant_group > 0 && t.shape.size() == 2 && t.shape[0] != t.shape[1]) id = t.id;
  REQUIRE(id >= 0);
  const auto want = cpu::CpuBackend().evaluate(g, 3, {id});
  const auto got = CudaBackend().evaluate(g, 3, {id});
  CHECK(got[0] == want[0]);  // stored [N, K] on the GPU, read back [K, N]
}
