// The fp8 inference path: the per-call activation quantizer (cuda_fp8_activation.hpp) against
// the host e4m3 recipe byte for byte (single-block and two-kernel sizes, aligned or not), the
// fp8 weight storage (fp8_storage: transposed once at fill time, read back in the graph's
// layout) and an fp8 decode step against the bf16 one, eager and replayed from a CUDA graph.
#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_fp8_activation.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "core/cost/memory_model.hpp"
#include "core/passes/passes.hpp"
#include "gpu_test_util.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::cuda;
using namespace perfsim::cuda::test;

namespace {

// Host recipe: scale = amax / 448 (1 for all zeros), q = e4m3(x * (1 / scale)), saturating.
std::pair<std::vector<unsigned char>, float> host_e4m3(const std::vector<float>& x) {
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::abs(v));
  const float scale = amax > 0 ? amax / e4m3_max : 1.0f, inv = 1.0f / scale;
  std::vector<unsigned char> q;
  q.reserve(x.size());
  for (float v : x) q.push_back(__nv_fp8_e4m3(v * inv).__x);
  return {q, scale};
}

template <class T>
void check_quantizer(Elem type, int64_t n, int64_t offset, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(offset);
  auto x = random_vec(static_cast<std::size_t>(n + offset), seed, 5.0f);
  x.back() = -7.5f;  // the absmax sits in the last element (the scalar tail when n is odd)
  const std::vector<float> xs = rounded<T>(x);  // the values the device sees
  const auto [want_q, want_scale] = host_e4m3(std::vector<float>(xs.begin() + offset, xs.end()));
  const DeviceBuffer dx = to_device(to_storage<T>(x));
  DeviceBuffer q = poisoned<unsigned char>(static_cast<std::size_t>(n + 1)), scale = poisoned<float>(1);
  DeviceBuffer ws = poisoned<unsigned char>(std::max<std::size_t>(fp8_activation_workspace_bytes(n), 1));
  quantize_activation_e4m3(dx.as<T>() + offset, type, q.as<uint8_t>() + offset % 2, scale.as<float>(), ws.get(), n,
                           nullptr);
  const auto got = from_device<unsigned char>(q, static_cast<std::size_t>(n + 1));
  CHECK(from_device<float>(scale, 1)[0] == want_scale);
  const std::vector<unsigned char> got_q(got.begin() + offset % 2, got.begin() + offset % 2 + n);
  CHECK(got_q == want_q);  // identical bytes: same scale, same rounding
}

ModelConfig tiny() {
  ModelConfig m = test_models::tiny_llama();
  m.layers = 2;
  m.vocab = 128;  // a multiple of 16 (cuBLASLt fp8)
  return m;
}

Graph decode_graph(const std::vector<std::string>& passes) {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 2, w.prompt = 6, w.new_tokens = 4;
  std::vector<StackStep> stack{{"step", {}}};
  for (const auto& p : passes) stack[0].passes.push_back(PassSpec{p, std::nullopt});
  return build_stack_graph(tiny(), w, stack, 0);
}

}  // namespace

TEST_CASE("cuda fp8: the activation quantizer matches the host e4m3 recipe") {
  // Single block (<= 2^16 elements) and the partials + cast pair; odd sizes take the tail.
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{4097}, fp8_single_block_max, fp8_single_block_max + 1,
                    int64_t{300001}, int64_t{1} << 21}) {
    check_quantizer<float>(Elem::f32, n, 0, 21);
    check_quantizer<host::bf16>(Elem::bf16, n, 0, 22);
    check_quantizer<host::bf16>(Elem::bf16, n, 3, 23);  // unaligned x and q: the scalar path
  }
  check_quantizer<host::half>(Elem::f16, 70000, 0, 24);
  // All zeros: scale 1, zero bytes.
  const DeviceBuffer zeros = to_device(std::vector<float>(100000, 0.0f));
  DeviceBuffer q = poisoned<unsigned char>(100000), scale = poisoned<float>(1);
  DeviceBuffer ws(fp8_activation_workspace_bytes(100000));
  quantize_activation_e4m3(zeros.get(), Elem::f32, q.as<uint8_t>(), scale.as<float>(), ws.get(), 100000, nullptr);
  CHECK(from_device<float>(scale, 1)[0] == 1.0f);
  CHECK(from_device<unsigned char>(q, 100000) == std::vector<unsigned char>(100000, 0));
}

TEST_CASE("cuda fp8: inference weights are stored transposed once and read back in the graph's layout") {
  const Graph bf16 = decode_graph({"bf16", "flash_attention"});
  const Graph fp8 = decode_graph({"bf16", "flash_attention", "fp8"});
  const std::vector<Fp8Storage> st = fp8_storage(fp8);
  std::map<std::string, int> bf16_ids;
  for (const Tensor& t : bf16.tensors) bf16_ids[t.name] = t.id;
  int stored_tn = 0, fp8_weights = 0, some = -1;
  for (const Tensor& t : fp8.tensors) {
    if (t.dtype != DType::fp8) continue;
    ++fp8_weights;
    const Fp8Storage& s = st[static_cast<std::size_t>(t.id)];
    if (!s.transposed) continue;
    ++stored_tn;
    CHECK(s.batch * s.k * s.n == t.elements());
    if (some < 0 || t.shape.back() != t.shape.front()) some = t.id;  // prefer a non-square weight
  }
  REQUIRE(fp8_weights > 0);
  CHECK(stored_tn == fp8_weights);  // every linear weight feeds only [k, n] fp8 GEMMs
  REQUIRE(some >= 0);
  CAPTURE(fp8.tensor(some).name);
  CudaBackend be;
  const auto got = be.evaluate(fp8, 5, {some});
  const auto want = be.evaluate(bf16, 5, {bf16_ids.at(fp8.tensor(some).name)});
  // e4m3 keeps 3 mantissa bits: a normal value moves by at most 1/16 of itself, a subnormal
  // one by at most scale * 2^-10; both are below amax / 16.
  CHECK(rel_err(got[0], want[0]) < 1.0 / 16);
}

TEST_CASE("cuda fp8: a decode step matches bf16, eager and replayed; weights cost 1 byte") {
  Graph bf16 = decode_graph({"bf16", "flash_attention"});
  Graph fp8 = decode_graph({"bf16", "flash_attention", "fp8"});
  const int logits = bf16.ops.back().outputs.at(0);
  std::map<std::string, int> fp8_ids;
  for (const Tensor& t : fp8.tensors) fp8_ids[t.name] = t.id;
  const int fp8_logits = fp8_ids.at(bf16.tensor(logits).name);
  CudaBackend be;
  const auto want = be.evaluate(bf16, 5, {logits});
  const auto eager = be.evaluate(fp8, 5, {fp8_logits});
  // e4m3 weights and activations (relative 2^-4 each) through two layers: ~15% of the range.
  CHECK(rel_err(eager[0], want[0]) < 0.15);
  fp8.graphed = true;
  const auto replayed = be.evaluate(fp8, 5, {fp8_logits});
  CHECK(rel_err(replayed[0], eager[0]) < 1e-6);
  RunOptions o;
  o.warmup = 1, o.repeats = 2;
  const Measurement m = be.run(fp8, o);
  const MemoryBreakdown pred = predict_memory(fp8, device_profile(0), false);
  // Weights at the peak are the model's 1-byte fp8 weights (no per-call transposed copies);
  // the staged activations, scale lines and per-tensor scales are planned workspace.
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::weight) == pred.by_role.at(TensorRole::weight));
  CHECK(m.bytes_by_role_at_peak.at(TensorRole::workspace) == pred.by_role.at(TensorRole::workspace));
  CHECK(m.peak_bytes == pred.peak);
}
