// The CUDA backend as a whole on builder graphs of a tiny Llama: evaluate() against
// CpuBackend::evaluate from the same initial values (decode, prefill, train; fp32 and bf16),
// the measured peak against the memory model, the out-of-memory message, CUDA graph replay
// against eager execution, an fp8 inference step against the fp32 one, a paged decode step, and
// ALiBi declined.
#include <doctest/doctest.h>

#include <map>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "core/cost/memory_model.hpp"
#include "core/cost/workspace.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "gpu_test_util.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

ModelConfig tiny() {
  ModelConfig m = test_models::tiny_llama();  // GQA: 4 query heads, 2 kv heads
  m.layers = 2;
  m.vocab = 128;  // a multiple of 16, so the fp8 lm_head GEMM is one cuBLASLt runs
  return m;
}

Workload inference(Phase p) {
  Workload w;
  w.phase = p;
  w.batch = 2, w.prompt = 6, w.new_tokens = 4;
  return w;
}

Workload training() {
  Workload w;
  w.phase = Phase::train;
  w.batch = 2, w.seq = 8;
  return w;
}

Graph graph_with(const Workload& w, const std::vector<std::string>& passes) {
  std::vector<StackStep> stack{{"step", {}}};
  for (const auto& p : passes) stack[0].passes.push_back(PassSpec{p, std::nullopt});
  return build_stack_graph(tiny(), w, stack, 0);
}

// What a step produces: the last op's outputs (logits / loss) and, in training, every
// gradient and the weights after the optimizer.
std::vector<int> results_of(const Graph& g) {
  std::vector<int> ids;
  for (int id : g.ops.back().outputs) ids.push_back(id);
  for (const Op& op : g.ops)
    if (op.kind == OpKind::cross_entropy || op.kind == OpKind::slice_last_token)
      for (int id : op.outputs) ids.push_back(id);
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::gradient || (g.workload.phase == Phase::train && t.role == TensorRole::weight))
      ids.push_back(t.id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void check_against_cpu(const Graph& g, double tol) {
  const std::vector<int> ids = results_of(g);
  REQUIRE(!ids.empty());
  const auto want = cpu::CpuBackend().evaluate(g, 7, ids);
  cuda::CudaBackend be;
  const auto got = be.evaluate(g, 7, ids);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CAPTURE(g.tensor(ids[i]).name);
    CHECK(rel_err(got[i], want[i]) < tol);
  }
}

RunOptions once() {
  RunOptions o;
  o.warmup = 1;
  o.repeats = 2;
  return o;
}

}  // namespace

TEST_CASE("cuda backend: tiny llama matches the CPU backend (fp32)") {
  for (Phase p : {Phase::decode, Phase::prefill, Phase::train}) {
    CAPTURE(name_of(p));
    const Workload w = p == Phase::train ? training() : inference(p);
    for (const char* pass : {"fp32", "flash_attention", "fusion"}) {
      CAPTURE(pass);
      // Summation orders differ from OpenBLAS and the CPU kernels; fp32 agrees to ~1e-6.
      check_against_cpu(graph_with(w, {pass}), 1e-4);
    }
  }
}

TEST_CASE("cuda backend: tiny llama matches the CPU backend (bf16)") {
  for (Phase p : {Phase::decode, Phase::prefill, Phase::train}) {
    CAPTURE(name_of(p));
    const Workload w = p == Phase::train ? training() : inference(p);
    check_against_cpu(graph_with(w, {"bf16", "flash_attention"}), 2e-2);
  }
}

TEST_CASE("cuda backend: a paged decode step matches the CPU backend and the memory model") {
  // head_dim 32 (the paged kernel takes 32, 64, 128 or 256); 4-row pages over a context of
  // 8 (+1): 3 pages per sequence, shuffled through the pool.
  ModelConfig m = tiny();
  m.hidden = 128, m.ffn_hidden = 256;
  Workload w = inference(Phase::decode);
  w.prompt = 6, w.new_tokens = 4;
  for (const char* precision : {"fp32", "bf16"}) {
    CAPTURE(precision);
    std::vector<StackStep> stack{
        {"step", {{precision, std::nullopt}, {"flash_attention", std::nullopt}, {"paged_kv", 4.0}}}};
    const Graph g = build_stack_graph(m, w, stack, 0);
    std::vector<int> ids = results_of(g);
    for (const Tensor& t : g.tensors)
      if (t.role == TensorRole::kv_cache) ids.push_back(t.id);  // the pages after the append
    const auto want = cpu::CpuBackend().evaluate(g, 7, ids);
    cuda::CudaBackend be;
    const auto got = be.evaluate(g, 7, ids);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      CAPTURE(g.tensor(ids[i]).name);
      CHECK(rel_err(got[i], want[i]) < (std::string(precision) == "fp32" ? 1e-4 : 2e-2));
    }
    const Measurement meas = be.run(g, once());
    CHECK(meas.peak_bytes == predict_memory(g, cuda::device_profile(0), false).peak);
  }
}

TEST_CASE("cuda backend: measured peak equals the memory model's, workspaces included") {
  // The memory model with the device's profile plans every kernel workspace, the cuBLASLt
  // workspace and the other step-long device buffers, so the allocator's high-water mark and
  // the prediction are the same number, byte for byte, role by role.
  const Hardware hw = cuda::device_profile(0);
  const std::vector<std::vector<std::string>> stacks{
      {"fp32"},
      {"bf16", "flash_attention"},
      {"bf16", "flash_attention", "fusion", "fused_optimizer"},
      {"bf16", "flash_attention", "recompute"},
      {"bf16"},  // materialized attention: the cuBLAS handle's workspace, GQA fp32 sums
  };
  for (Phase p : {Phase::decode, Phase::prefill, Phase::train}) {
    CAPTURE(name_of(p));
    const Workload w = p == Phase::train ? training() : inference(p);
    for (const auto& stack : stacks) {
      if (p != Phase::train && (stack.back() == "recompute" || stack.back() == "fused_optimizer")) continue;
      std::string label;
      for (const auto& s : stack) label += s + " ";
      CAPTURE(label);
      const Graph g = graph_with(w, stack);
      cuda::CudaBackend be;
      const Measurement m = be.run(g, once());
      const MemoryBreakdown pred = predict_memory(g, hw, false);
      CHECK(m.backend == "cuda");
      CHECK(m.step_time > 0);
      for (const OpMeasurement& om : m.ops) CHECK(om.executed);
      CHECK(m.peak_bytes == pred.peak);
      for (TensorRole r : all_tensor_roles) {
        CAPTURE(name_of(r));
        CHECK(m.bytes_by_role_at_peak.at(r) == pred.by_role.at(r));
      }
      CHECK(pred.by_role.at(TensorRole::workspace) >= 32.0 * 1024 * 1024);  // cuBLASLt's, at least
    }
  }
}

TEST_CASE("cuda backend: kernels use exactly the planned workspace") {
  // Every op's kernels carve exactly workspace_bytes(op) out of its block: the core mirror of
  // the kernels' size functions neither over- nor under-plans (under-planning would throw).
  cuda::CachingAllocator alloc;
  cuda::GemmEngine gemm;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  for (const auto& stack : std::vector<std::vector<std::string>>{{"fp32"},
                                                                {"bf16", "flash_attention", "fused_optimizer"},
                                                                {"bf16"},
                                                                {"bf16", "flash_attention", "fp8"}}) {
    for (Phase p : {Phase::decode, Phase::prefill, Phase::train}) {
      if (p != Phase::decode && stack.back() == "fp8") continue;  // fp8: the decode step of test_cuda_fp8
      const Graph g = graph_with(p == Phase::train ? training() : inference(p), stack);
      CAPTURE(g.ops.size());
      cuda::GraphRunner runner(g, 3, alloc, gemm, stream);
      (void)runner.run_once();
      for (const std::string& bad : runner.workspace_mismatches()) FAIL_CHECK(bad);
    }
  }
  (void)cudaStreamDestroy(stream);
}

TEST_CASE("cuda allocator: a held cache keeps its blocks through an out-of-memory request") {
  cuda::CachingAllocator alloc;
  constexpr std::size_t block = std::size_t{4} << 20;
  constexpr std::size_t too_much = std::size_t{1} << 40;  // 1 TiB: no GPU has it
  void* p = alloc.allocate(block, TensorRole::activation);
  alloc.release(p);
  alloc.hold_cache(true);
  CHECK_THROWS_WITH_AS((void)alloc.allocate(too_much, TensorRole::activation),
                       doctest::Contains("kept for captured CUDA graphs"), NotExecutable);
  CHECK(alloc.reserved_bytes() == doctest::Approx(static_cast<double>(block)));  // not freed
  void* again = alloc.allocate(block, TensorRole::activation);
  CHECK(again == p);  // the cached block, still the device's
  alloc.release(again);
  alloc.hold_cache(false);
  CHECK_THROWS_AS((void)alloc.allocate(too_much, TensorRole::activation), NotExecutable);
  CHECK(alloc.reserved_bytes() == 0);  // released to retry
}

TEST_CASE("cuda backend: a graph that does not fit says so") {
  Graph g;
  g.model = "huge";
  Tensor x;
  x.name = "huge.input";
  x.shape = {int64_t{1} << 38};  // 1 TiB of fp32
  x.role = TensorRole::input;
  const int in = g.add_tensor(x);
  Tensor y = x;
  y.name = "huge.copy";
  y.role = TensorRole::activation;
  const int out = g.add_tensor(y);
  Op op;
  op.name = "copy";
  op.kind = OpKind::copy;
  op.inputs = {in};
  op.outputs = {out};
  op.attrs.elements = x.shape[0];
  g.add_op(op);
  cuda::CudaBackend be;
  CHECK_THROWS_WITH_AS((void)be.run(g, once()), doctest::Contains("does not fit: needs"), NotExecutable);
  // Nothing stays allocated after the failure.
  CHECK(be.allocator().current_bytes() == 0);
}

TEST_CASE("cuda backend: CUDA graph replay gives the eager results") {
  for (Phase p : {Phase::decode, Phase::train}) {
    CAPTURE(name_of(p));
    const Workload w = p == Phase::train ? training() : inference(p);
    Graph g = graph_with(w, {"flash_attention", "fused_optimizer"});
    const std::vector<int> ids = results_of(g);
    cuda::CudaBackend be;
    const auto eager = be.evaluate(g, 3, ids);
    g.graphed = true;
    const auto replayed = be.evaluate(g, 3, ids);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      CAPTURE(g.tensor(ids[i]).name);
      CHECK(rel_err(replayed[i], eager[i]) < 1e-6);
    }
    const Measurement m = be.run(g, once());
    CHECK(m.graph_replayed);
    CHECK(m.executed_wall > 0);
    // The replay's own op times, less the event nodes' cost (floored at 0, which the slow
    // kernels under compute-sanitizer can reach); together they are the replay.
    double sum = 0;
    for (const OpMeasurement& om : m.ops) {
      CHECK(om.median >= 0);
      sum += om.median;
    }
    CHECK(sum > 0);
    CHECK(m.peak_bytes == be.run([&] { Graph e = g; e.graphed = false; return e; }(), once()).peak_bytes);
  }
}

TEST_CASE("cuda backend: an fp8 inference step stays close to the fp32 one") {
  const Workload w = inference(Phase::prefill);
  const Graph base = graph_with(w, {"bf16"});
  const Graph fp8 = graph_with(w, {"bf16", "fp8"});
  std::map<std::string, int> fp8_ids;
  for (const Tensor& t : fp8.tensors) fp8_ids[t.name] = t.id;
  const int logits = base.ops.back().outputs.at(0);
  cuda::CudaBackend be;
  REQUIRE(graph_unsupported_reason(be, fp8).empty());
  const auto want = be.evaluate(base, 5, {logits});
  const auto got = be.evaluate(fp8, 5, {fp8_ids.at(base.tensor(logits).name)});
  // e4m3 keeps 3 mantissa bits (relative 2^-4 per input); through two layers the logits
  // stay within ~15% of their range.
  CHECK(rel_err(got[0], want[0]) < 0.15);
}

TEST_CASE("cuda backend: ALiBi attention is declined, not computed without its bias") {
  ModelConfig m = tiny();
  m.rope = false;
  m.alibi = true;
  std::vector<StackStep> stack{{"step", {}}};
  const Graph g = build_stack_graph(m, training(), stack, 0);
  cuda::CudaBackend be;
  CHECK(graph_unsupported_reason(be, g).find("has no GPU kernel for ALiBi yet") != std::string::npos);
}

TEST_CASE("cuda backend: eager runs time the host's issue of every op, replays do not") {
  Graph g = graph_with(inference(Phase::decode), {"bf16", "flash_attention"});
  cuda::CudaBackend be;
  const Measurement eager = be.run(g, once());
  for (const OpMeasurement& om : eager.ops) {
    CHECK(om.host > 0);
    CHECK(om.host < 0.1);  // issuing one small kernel takes microseconds, never 100 ms
  }
  g.graphed = true;
  for (const OpMeasurement& om : be.run(g, once()).ops) CHECK(om.host == 0);
}

TEST_CASE("cuda backend: eager runs time every op with the stream held, unless asked not to") {
  const Graph g = graph_with(inference(Phase::decode), {"bf16", "flash_attention"});
  cuda::CudaBackend be;
  RunOptions o = once();
  o.repeats = 3;
  const Measurement held = be.run(g, o);
  for (std::size_t i = 0; i < held.ops.size(); ++i) {
    INFO(g.ops[i].name);
    CHECK(held.ops[i].device > 0);
    CHECK(held.ops[i].device < 0.01);  // a tiny model's kernels take microseconds
  }
  o.device_times = false;
  for (const OpMeasurement& om : be.run(g, o).ops) CHECK(om.device == 0);
}
