// The executed serving engine on the GPU: a packed engine step (decodes beside a prompt chunk
// after cached tokens, over scattered pages) gives the CPU engine's logits in fp32 and bf16,
// the second step reading the pages the first one wrote; and an executed run serves every
// request to its output length.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "backends/cpu/cpu_graph_runner.hpp"
#include "backends/cpu/shared_tensors.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/cuda_shared_tensors.hpp"
#include "core/builders/builders.hpp"
#include "core/passes/passes.hpp"
#include "core/run/engine_clock.hpp"
#include "gpu_test_util.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

namespace {

constexpr uint64_t seed = 11;
constexpr int64_t block = 16;

// head_dim 64: the tensor-core path of the varlen attention in bf16.
ModelConfig model() {
  ModelConfig m = test_models::llama("engine-llama", 2, 256, 4, 2, 512, 128, 512);
  return m;
}

int tensor_named(const Graph& g, const std::string& name) {
  const int id = g.find_tensor(name);
  REQUIRE_MESSAGE(id >= 0, "no tensor " << name);
  return id;
}

struct Seq {
  int64_t from = 0, to = 0;
  std::vector<int32_t> blocks;
};

// The step of `seqs` (decodes first) with deterministic token ids, its graph in `precision`.
std::pair<Graph, StepInputs> step_of(const std::vector<Seq>& seqs, const char* precision) {
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
  apply_graph_pass(PassSpec{precision}, g);
  return {std::move(g),
          {{engine_input::tokens, ids},
           {engine_input::positions, positions},
           {engine_input::slots, slots},
           {engine_input::block_table, table},
           {engine_input::query_start, query_start},
           {engine_input::kv_len, kv_len},
           {engine_input::sample_rows, rows}}};
}

std::vector<int> kept_logits(const Graph& g, std::vector<char>& keep) {
  keep.assign(g.tensors.size(), 0);
  const int id = tensor_named(g, "lm_head.out");
  keep[static_cast<std::size_t>(id)] = 1;
  return {id};
}

}  // namespace

TEST_CASE("cuda engine: packed steps over scattered pages give the CPU engine's logits") {
  // Step 1: two prompts fill their pages (one of 40 tokens, one of 21). Step 2: the second
  // decodes its 22nd token beside the first's 30-token chunk after its 40 cached ones.
  const std::vector<int32_t> a_blocks{9, 2, 17, 5, 20}, b_blocks{12, 0};
  const std::vector<std::vector<Seq>> steps{{{0, 40, a_blocks}, {0, 21, b_blocks}},
                                            {{21, 22, b_blocks}, {40, 70, a_blocks}}};
  for (const char* precision : {"fp32", "bf16"}) {
    CAPTURE(precision);
    cpu::SharedTensors cpu_shared;
    cuda::SharedTensors gpu_shared;
    cuda::CachingAllocator alloc;
    cuda::GemmEngine gemm;
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    for (const auto& seqs : steps) {
      const auto step = step_of(seqs, precision);
      const Graph& g = step.first;
      std::vector<char> keep;
      const int logits = kept_logits(g, keep).front();
      cpu::GraphRunner want_runner(g, seed, nullptr, &cpu_shared);
      for (const auto& in : step.second) want_runner.write(tensor_named(g, in.first), in.second);
      want_runner.run_once(nullptr, &keep);
      const std::vector<float> want = want_runner.read(logits);
      std::vector<float> got;
      {
        cuda::GraphRunner runner(g, seed, alloc, gemm, stream, nullptr, &gpu_shared, false);
        for (const auto& in : step.second) runner.write(tensor_named(g, in.first), in.second);
        runner.run_once(nullptr, &keep);
        got = runner.read(logits);
      }
      CHECK(rel_err(got, want) < (std::string(precision) == "fp32" ? 1e-4 : 3e-2));
    }
    (void)cudaStreamDestroy(stream);
  }
}

TEST_CASE("cuda engine: an executed run serves every request to its output length") {
  const ModelConfig m = model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 12; ++i) {
    Request r;
    r.id = i;
    r.arrival = i < 6 ? 0.0 : 0.002;
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
    CAPTURE(graphs);  // with CUDA graphs, decode-only steps replay a graph per padded size
    ExecutedClock clock(*session, m, {{"bf16", {PassSpec{"bf16"}}, ""}}, pool, 1, graphs);
    const EngineRun run = run_engine(requests, c, pool, m.max_seq, 0, clock);
    for (const RequestRecord& r : run.requests) {
      CHECK(r.rejected.empty());
      CHECK(r.generated == r.request.output);
    }
    REQUIRE(clock.steps().size() == run.steps.size());
    for (const ExecutedStep& s : clock.steps()) {
      CHECK(s.device > 0);
      CHECK(s.device <= s.wall);
    }
  }
}

TEST_CASE("cuda engine: a step timed op by op gives each op its time within the step's") {
  const auto step = step_of({{0, 40, {9, 2, 17, 5, 20}}, {0, 21, {12, 0}}}, "bf16");
  cuda::CudaBackend backend;
  const auto session = backend.open_engine(seed);
  (void)session->run_step(step.first, step.second);  // makes the weights and pages
  const StepTimes t = session->run_step_ops(step.first, step.second);
  REQUIRE(t.ops.size() == step.first.ops.size());
  double sum = 0;
  for (double s : t.ops) {
    CHECK(s >= 0);
    sum += s;
  }
  CHECK(sum > 0);
  CHECK(sum <= t.device * 1.001);
  CHECK(t.device <= t.wall);
}
