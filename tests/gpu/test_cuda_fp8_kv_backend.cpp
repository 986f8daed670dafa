// Graphs with the fp8_kv pass on the CUDA backend (the kernels themselves: test_cuda_fp8_kv_kernels.cpp).
// A decode step (the split-KV decode kernel), a prefill after cached tokens (flash attention's
// tensor-core kernel over the cache) and a paged decode step run with their cache in fp8 and stay
// close to their bf16 twins: the logits, and the cache after the step's appends. Their measured
// peak equals the memory model's, role by role (the cache at one byte per element and no converted
// copy of it in any workspace), every kernel carves exactly its planned workspace, and a CUDA graph
// replays the eager results. A serving engine's packed steps over fp8 pages give the bf16
// engine's logits within the same bound, and an executed run over fp8 pages serves every request.
// fp32 attention over an fp8 cache is declined with its reason; its appends are not.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/cuda_shared_tensors.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/memory_model.hpp"
#include "core/passes/passes.hpp"
#include "core/run/engine_clock.hpp"
#include "gpu_test_util.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

constexpr uint64_t seed = 7;

// head_dim 64 (GQA 2): the split-KV decode kernel and the tensor-core flash kernel.
ModelConfig model() { return test_models::llama("fp8kv-llama", 2, 256, 4, 2, 512, 128, 512); }

Graph graph_with(const Workload& w, std::vector<PassSpec> passes) {
  return build_stack_graph(model(), w, {{"step", std::move(passes)}}, 0);
}

// e4m3 keeps 3 mantissa bits: a cached value moves by at most 1/16 of itself. Through attention
// and two layers the logits move by a few percent of their range; 0.15 as the fp8 GEMM step.
constexpr double logits_tolerance = 0.15;

// The bf16 stack's step against the same stack with fp8_kv last: logits and every cache after the
// step, the memory model's peak, the planned workspaces, a graph replay.
void check_step(const Workload& w, std::vector<PassSpec> stack) {
  const Graph want_g = graph_with(w, stack);
  stack.emplace_back("fp8_kv");
  const Graph g = graph_with(w, stack);
  std::vector<int> ids{g.ops.back().outputs.at(0)}, want_ids{want_g.ops.back().outputs.at(0)};
  for (const Tensor& t : g.tensors)
    if (t.role == TensorRole::kv_cache) {
      REQUIRE(t.dtype == DType::fp8);
      ids.push_back(t.id);
      want_ids.push_back(want_g.find_tensor(t.name));
    }
  REQUIRE(ids.size() > 1);
  cuda::CudaBackend be;
  for (const Op& op : g.ops) {
    CAPTURE(op.name);
    CHECK(be.unsupported_reason(op, g).empty());
  }
  const auto want = be.evaluate(want_g, seed, want_ids);
  const auto got = be.evaluate(g, seed, ids);
  CHECK(rel_err(got[0], want[0]) < logits_tolerance);
  for (std::size_t i = 1; i < ids.size(); ++i) {
    CAPTURE(g.tensor(ids[i]).name);
    CHECK(rel_err(got[i], want[i]) < 1.0 / 16);  // initial values and appended rows, stored in e4m3
  }

  Graph replay = g;
  replay.graphed = true;
  const auto replayed = be.evaluate(replay, seed, ids);
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(rel_err(replayed[i], got[i]) < 1e-6);

  RunOptions o;
  o.warmup = 1, o.repeats = 2;
  const Measurement m = be.run(g, o);
  const MemoryBreakdown pred = predict_memory(g, cuda::device_profile(0), false);
  CHECK(m.peak_bytes == pred.peak);
  for (TensorRole r : all_tensor_roles) {
    CAPTURE(name_of(r));
    CHECK(m.bytes_by_role_at_peak.at(r) == pred.by_role.at(r));
  }
  // One byte per cached element: half the bf16 cache.
  CHECK(2 * pred.by_role.at(TensorRole::kv_cache) ==
        predict_memory(want_g, cuda::device_profile(0), false).by_role.at(TensorRole::kv_cache));

  cuda::CachingAllocator alloc;
  cuda::GemmEngine gemm;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  {
    cuda::GraphRunner runner(g, 3, alloc, gemm, stream);
    (void)runner.run_once();
    for (const std::string& bad : runner.workspace_mismatches()) FAIL_CHECK(bad);
  }
  (void)cudaStreamDestroy(stream);
}

Workload decode() {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 2, w.prompt = 40, w.new_tokens = 8;
  return w;
}

}  // namespace

TEST_CASE("cuda fp8 kv: a decode step matches its bf16 twin and the memory model") {
  check_step(decode(), {PassSpec{"bf16"}, PassSpec{"flash_attention"}});
}

TEST_CASE("cuda fp8 kv: a prefill after cached tokens matches its bf16 twin and the memory model") {
  Workload w;
  w.phase = Phase::prefill;
  w.batch = 2, w.prompt = 56, w.cached = 16, w.new_tokens = 8;  // 40 queries: flash attention's kernel
  check_step(w, {PassSpec{"bf16"}, PassSpec{"flash_attention"}});
}

TEST_CASE("cuda fp8 kv: a paged decode step matches its bf16 twin and the memory model") {
  check_step(decode(), {PassSpec{"bf16"}, PassSpec{"flash_attention"}, PassSpec{"paged_kv", 16.0}});
}

TEST_CASE("cuda fp8 kv: fp32 attention over an fp8 cache is declined, its appends are not") {
  const Graph g = graph_with(decode(), {PassSpec{"fp32"}, PassSpec{"flash_attention"}, PassSpec{"fp8_kv"}});
  cuda::CudaBackend be;
  int attention = 0, appends = 0;
  for (const Op& op : g.ops) {
    CAPTURE(op.name);
    const std::string why = be.unsupported_reason(op, g);
    if (op.kind == OpKind::flash_attention) {
      ++attention;
      CHECK(why.find("bf16 or fp16") != std::string::npos);
    } else if (op.kind == OpKind::kv_append) {
      ++appends;
      CHECK(why.empty());
    }
  }
  CHECK(attention > 0);
  CHECK(appends > 0);
}

namespace {

constexpr int64_t block = 16;

struct Seq {
  int64_t from = 0, to = 0;
  std::vector<int32_t> blocks;
};

// The engine step of `seqs` (decodes first), as test_cuda_engine.cpp builds it, with `passes`.
std::pair<Graph, StepInputs> step_of(const std::vector<Seq>& seqs, const std::vector<std::string>& passes) {
  const ModelConfig m = model();
  EngineStepShape sh;
  sh.kv_block = block;
  sh.pool_blocks = 24;
  sh.table_width = m.max_seq / block;
  std::vector<int32_t> ids, positions, slots, table, query_start{0}, kv_len, rows;
  for (const Seq& s : seqs) {
    sh.q_len.push_back(s.to - s.from);
    sh.kv_len.push_back(s.to);
    for (int64_t j = s.from; j < s.to; ++j) {
      ids.push_back(static_cast<int32_t>((j * 37 + s.blocks[0]) % m.vocab));
      positions.push_back(static_cast<int32_t>(j));
      slots.push_back(static_cast<int32_t>(s.blocks[static_cast<std::size_t>(j / block)] * block + j % block));
    }
    for (int64_t c = 0; c < sh.table_width; ++c)
      table.push_back(static_cast<std::size_t>(c) < s.blocks.size() ? s.blocks[static_cast<std::size_t>(c)] : 0);
    query_start.push_back(query_start.back() + static_cast<int32_t>(s.to - s.from));
    kv_len.push_back(static_cast<int32_t>(s.to));
    rows.push_back(query_start.back() - 1);
  }
  sh.sampled = static_cast<int64_t>(rows.size());
  Graph g = build_engine_step(m, sh);
  for (const std::string& p : passes) apply_graph_pass(PassSpec{p}, g);
  return {std::move(g),
          {{engine_input::tokens, ids},
           {engine_input::positions, positions},
           {engine_input::slots, slots},
           {engine_input::block_table, table},
           {engine_input::query_start, query_start},
           {engine_input::kv_len, kv_len},
           {engine_input::sample_rows, rows}}};
}

}  // namespace

TEST_CASE("cuda fp8 kv: packed engine steps over fp8 pages give the bf16 engine's logits") {
  // Step 1: two prompts fill their pages (40 and 21 tokens). Step 2: the second decodes its 22nd
  // token beside the first's 30-token chunk after its 40 cached ones, reading step 1's fp8 rows.
  const std::vector<int32_t> a_blocks{9, 2, 17, 5, 20}, b_blocks{12, 0};
  const std::vector<std::vector<Seq>> steps{{{0, 40, a_blocks}, {0, 21, b_blocks}},
                                            {{21, 22, b_blocks}, {40, 70, a_blocks}}};
  cuda::SharedTensors fp8_shared, bf16_shared;
  cuda::CachingAllocator alloc;
  cuda::GemmEngine gemm;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  for (const auto& seqs : steps) {
    std::map<bool, std::vector<std::vector<float>>> out;  // fp8 -> logits, layer 0's K pages
    for (const bool fp8 : {false, true}) {
      const auto step =
          step_of(seqs, fp8 ? std::vector<std::string>{"bf16", "fp8_kv"} : std::vector<std::string>{"bf16"});
      const Graph& g = step.first;
      const int logits = g.find_tensor("lm_head.out");
      int pages = -1;
      for (const Tensor& t : g.tensors)
        if (t.role == TensorRole::kv_cache && pages < 0) pages = t.id;
      REQUIRE(logits >= 0);
      REQUIRE(pages >= 0);
      CHECK((g.tensor(pages).dtype == DType::fp8) == fp8);
      std::vector<char> keep(g.tensors.size(), 0);
      keep[static_cast<std::size_t>(logits)] = 1;
      cuda::GraphRunner runner(g, seed, alloc, gemm, stream, nullptr, fp8 ? &fp8_shared : &bf16_shared, false);
      for (const auto& in : step.second) runner.write(g.find_tensor(in.first), in.second);
      runner.run_once(nullptr, &keep);
      out[fp8] = {runner.read(logits), runner.read(pages)};
    }
    CHECK(rel_err(out[true][0], out[false][0]) < logits_tolerance);
    CHECK(rel_err(out[true][1], out[false][1]) < 1.0 / 16);
  }
  (void)cudaStreamDestroy(stream);
}

TEST_CASE("cuda fp8 kv: an executed engine run over fp8 pages serves every request") {
  const ModelConfig m = model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 8; ++i) {
    Request r;
    r.id = i;
    r.arrival = i < 4 ? 0.0 : 0.002;
    r.prompt = 20 + 17 * i;
    r.output = 3 + i % 5;
    requests.push_back(r);
  }
  SchedulerConfig c;
  c.kind = SchedulerKind::continuous;
  c.paged = true;
  c.block = block;
  c.chunked_prefill = 64;
  c.watermark = 0;
  KvPool pool;
  pool.blocks = 64;
  pool.block = block;
  pool.block_bytes = 4096;
  cuda::CudaBackend backend;
  const auto session = backend.open_engine(seed);
  for (const bool graphs : {false, true}) {
    CAPTURE(graphs);
    ExecutedClock clock(*session, m, {{"bf16+fp8_kv", {PassSpec{"bf16"}, PassSpec{"fp8_kv"}}, ""}}, pool, 1, graphs);
    const EngineRun run = run_engine(requests, c, pool, m.max_seq, 0, clock);
    for (const RequestRecord& r : run.requests) {
      CHECK(r.rejected.empty());
      CHECK(r.generated == r.request.output);
    }
  }
}
