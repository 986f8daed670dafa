// The executed serving engine on the CPU backend: a packed engine step over a page pool gives
// the logits a plain prefill gives (whole, chunked, and beside other sequences; close to them
// over an fp8 pool), and an executed run serves every request to its output length (fp8 pool too).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_graph_runner.hpp"
#include "backends/cpu/shared_tensors.hpp"
#include "core/builders/builders.hpp"
#include "core/passes/passes.hpp"
#include "core/run/engine_clock.hpp"
#include "core/serve/engine.hpp"
#include "core/serve/metrics.hpp"
#include "graph_test_models.hpp"
#include "serve_test_util.hpp"

using namespace perfsim;

namespace {

constexpr uint64_t seed = 7;

// Continuous batching over pages of 4 rows, no watermark; a pool of 32 such pages.
SchedulerConfig paged_continuous() {
  SchedulerConfig c;
  c.kind = SchedulerKind::continuous;
  c.paged = true;
  c.block = 4;
  c.watermark = 0;
  return c;
}

KvPool small_pool() {
  KvPool pool;
  pool.blocks = 32;
  pool.block = 4;
  pool.block_bytes = 1024;
  return pool;
}

int tensor_named(const Graph& g, const std::string& name) {
  const int id = g.find_tensor(name);
  REQUIRE_MESSAGE(id >= 0, "no tensor " << name);
  return id;
}

// Runs g once with `inputs` written and returns the logits.
std::vector<float> logits_of(const Graph& g, const StepInputs& inputs, cpu::SharedTensors* shared) {
  cpu::GraphRunner runner(g, seed, nullptr, shared);
  for (const auto& in : inputs) runner.write(tensor_named(g, in.first), in.second);
  std::vector<char> keep(g.tensors.size(), 0);
  const int logits = tensor_named(g, "lm_head.out");
  keep[static_cast<std::size_t>(logits)] = 1;
  runner.run_once(nullptr, &keep);
  return runner.read(logits);
}

// The last token's logits of a plain prefill over `ids`.
std::vector<float> prefill_logits(const ModelConfig& m, const std::vector<int32_t>& ids) {
  Workload w;
  w.phase = Phase::prefill;
  w.batch = 1;
  w.prompt = static_cast<int64_t>(ids.size());
  w.new_tokens = 1;
  const Graph g = build_prefill(m, w);
  return logits_of(g, {{"tokens", ids}}, nullptr);
}

// One sequence's part of an engine step: tokens ids[from, to) of a sequence whose pages are
// `blocks` (block rows each).
struct Part {
  std::vector<int32_t> ids;
  int64_t from = 0, to = 0;
  std::vector<int32_t> blocks;
  bool samples = true;
};

// The engine step of `parts` (decodes first) and its inputs.
std::pair<Graph, StepInputs> engine_step(const ModelConfig& m, const std::vector<Part>& parts, int64_t block,
                                         int64_t pool_blocks) {
  EngineStepShape sh;
  sh.kv_block = block;
  sh.pool_blocks = pool_blocks;
  sh.table_width = m.max_seq / block;
  std::vector<int32_t> ids, positions, slots, table, query_start{0}, kv_len, rows;
  for (const Part& p : parts) {
    sh.q_len.push_back(p.to - p.from);
    sh.kv_len.push_back(p.to);
    for (int64_t j = p.from; j < p.to; ++j) {
      ids.push_back(p.ids[static_cast<std::size_t>(j)]);
      positions.push_back(static_cast<int32_t>(j));
      slots.push_back(static_cast<int32_t>(p.blocks[static_cast<std::size_t>(j / block)] * block + j % block));
    }
    for (int64_t c = 0; c < sh.table_width; ++c)
      table.push_back(static_cast<std::size_t>(c) < p.blocks.size() ? p.blocks[static_cast<std::size_t>(c)] : 0);
    query_start.push_back(query_start.back() + static_cast<int32_t>(p.to - p.from));
    kv_len.push_back(static_cast<int32_t>(p.to));
    if (p.samples) rows.push_back(query_start.back() - 1);
  }
  sh.sampled = static_cast<int64_t>(rows.size());
  StepInputs in{{engine_input::tokens, ids},           {engine_input::positions, positions},
                {engine_input::slots, slots},          {engine_input::block_table, table},
                {engine_input::query_start, query_start}, {engine_input::kv_len, kv_len}};
  if (!rows.empty()) in.emplace_back(engine_input::sample_rows, rows);
  return {build_engine_step(m, sh), in};
}

double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

std::vector<float> row(const std::vector<float>& logits, int64_t r, int64_t vocab) {
  return {logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab};
}

std::vector<int32_t> ids_of(int64_t n, int32_t first) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>((first + 7 * i) % 100));
  return v;
}

}  // namespace

TEST_CASE("cpu engine: a whole prompt in one engine step gives the prefill's logits") {
  const ModelConfig m = test_models::tiny_llama();
  const std::vector<int32_t> ids = ids_of(10, 3);
  cpu::SharedTensors shared;
  const auto step = engine_step(m, {{ids, 0, 10, {5, 2, 7}, true}}, 4, 8);
  CHECK(max_rel_diff(logits_of(step.first, step.second, &shared), prefill_logits(m, ids)) < 1e-4);
}

TEST_CASE("cpu engine: a prompt in two chunks over scattered pages gives the prefill's logits") {
  const ModelConfig m = test_models::tiny_llama();
  const std::vector<int32_t> ids = ids_of(10, 11);
  cpu::SharedTensors shared;  // the pages the first chunk fills, the second reads
  const std::vector<int32_t> blocks{6, 1, 3};
  const auto first = engine_step(m, {{ids, 0, 6, blocks, false}}, 4, 8);
  cpu::GraphRunner runner(first.first, seed, nullptr, &shared);
  for (const auto& in : first.second) runner.write(tensor_named(first.first, in.first), in.second);
  runner.run_once();
  const auto second = engine_step(m, {{ids, 6, 10, blocks, true}}, 4, 8);
  CHECK(max_rel_diff(logits_of(second.first, second.second, &shared), prefill_logits(m, ids)) < 1e-4);
}

TEST_CASE("cpu engine: a decode beside another sequence's prompt gives each one's own logits") {
  const ModelConfig m = test_models::tiny_llama();
  const std::vector<int32_t> a = ids_of(9, 5), b = ids_of(7, 40);
  cpu::SharedTensors shared;
  const std::vector<int32_t> a_blocks{4, 0, 2}, b_blocks{7, 3};
  // Sequence a's first 8 tokens fill its pages; then its 9th decodes beside b's whole prompt.
  const auto fill = engine_step(m, {{a, 0, 8, a_blocks, true}}, 4, 8);
  (void)logits_of(fill.first, fill.second, &shared);
  const auto step = engine_step(m, {{a, 8, 9, a_blocks, true}, {b, 0, 7, b_blocks, true}}, 4, 8);
  const Op* flash = nullptr;
  for (const Op& op : step.first.ops)
    if (op.kind == OpKind::varlen_flash_attention) flash = &op;
  REQUIRE(flash != nullptr);
  CHECK(flash->attrs.decode_seqs == 1);
  const std::vector<float> logits = logits_of(step.first, step.second, &shared);
  CHECK(max_rel_diff(row(logits, 0, m.vocab), prefill_logits(m, a)) < 1e-4);
  CHECK(max_rel_diff(row(logits, 1, m.vocab), prefill_logits(m, b)) < 1e-4);
}

TEST_CASE("cpu engine: an ALiBi model's decode beside a prompt gives the prefill's logits") {
  // The packed step biases each query by its own sequence's position, as the prefill's
  // materialized softmax does.
  ModelConfig m = test_models::tiny_llama();
  m.rope = false;
  m.alibi = true;
  const std::vector<int32_t> a = ids_of(9, 5), b = ids_of(7, 40);
  cpu::SharedTensors shared;
  const std::vector<int32_t> a_blocks{4, 0, 2}, b_blocks{7, 3};
  const auto fill = engine_step(m, {{a, 0, 8, a_blocks, true}}, 4, 8);
  (void)logits_of(fill.first, fill.second, &shared);
  const auto step = engine_step(m, {{a, 8, 9, a_blocks, true}, {b, 0, 7, b_blocks, true}}, 4, 8);
  for (const Op& op : step.first.ops) CHECK(op.kind != OpKind::rope);
  const std::vector<float> logits = logits_of(step.first, step.second, &shared);
  CHECK(max_rel_diff(row(logits, 0, m.vocab), prefill_logits(m, a)) < 1e-4);
  CHECK(max_rel_diff(row(logits, 1, m.vocab), prefill_logits(m, b)) < 1e-4);
}

TEST_CASE("cpu engine: over an fp8 KV pool, chunks and a decode beside a prompt stay near the prefill's logits") {
  // The pool holds e4m3 rows (3 mantissa bits, errors to 1/16 of a value): the logits follow the
  // fp32 prefill's to a few percent, where an fp32 pool gives them to 1e-4.
  const ModelConfig m = test_models::tiny_llama();
  auto fp8 = [](std::pair<Graph, StepInputs> step) {
    apply_graph_pass(PassSpec{"fp8_kv"}, step.first);
    return step;
  };
  const std::vector<int32_t> a = ids_of(9, 5), b = ids_of(7, 40);
  cpu::SharedTensors shared;
  const std::vector<int32_t> a_blocks{4, 0, 2}, b_blocks{7, 3};
  const auto first = fp8(engine_step(m, {{a, 0, 5, a_blocks, true}}, 4, 8));
  (void)logits_of(first.first, first.second, &shared);
  const auto second = fp8(engine_step(m, {{a, 5, 8, a_blocks, true}}, 4, 8));
  (void)logits_of(second.first, second.second, &shared);
  const auto step = fp8(engine_step(m, {{a, 8, 9, a_blocks, true}, {b, 0, 7, b_blocks, true}}, 4, 8));
  for (const Tensor& t : step.first.tensors) CHECK((t.dtype == DType::fp8) == (t.role == TensorRole::kv_cache));
  CHECK(graph_unsupported_reason(cpu::CpuBackend(), step.first) == "");
  const std::vector<float> logits = logits_of(step.first, step.second, &shared);
  const double err_a = max_rel_diff(row(logits, 0, m.vocab), prefill_logits(m, a));
  const double err_b = max_rel_diff(row(logits, 1, m.vocab), prefill_logits(m, b));
  CHECK(err_a < 0.1);
  CHECK(err_b < 0.1);
  CHECK(err_a > 1e-4);  // the rows really went through fp8
}

TEST_CASE("cpu engine: an executed run serves every request to its output length") {
  for (const bool fp8_pool : {false, true}) {
    CAPTURE(fp8_pool);
    const ModelConfig m = test_models::tiny_llama();
    std::vector<Request> requests;
    for (int64_t i = 0; i < 6; ++i) requests.push_back(test::request(i, i < 3 ? 0.0 : 0.001, 5 + 3 * i, 2 + i % 3));
    SchedulerConfig c = paged_continuous();
    c.chunked_prefill = 8;
    const KvPool pool = small_pool();
    cpu::CpuBackend backend;
    const auto session = backend.open_engine(seed);
    std::vector<StackStep> graph_stack;
    if (fp8_pool) graph_stack.push_back(StackStep{"+fp8_kv", {PassSpec{"fp8_kv"}}});
    ExecutedClock clock(*session, m, graph_stack, pool, 1);
    const EngineRun run = run_engine(requests, c, pool, m.max_seq, 0, clock);
    REQUIRE(run.requests.size() == requests.size());
    for (const RequestRecord& r : run.requests) {
      CHECK(r.rejected.empty());
      CHECK(r.generated == r.request.output);
      CHECK(r.first_token >= r.request.arrival);
      CHECK(r.finished >= r.first_token);
    }
    REQUIRE(clock.steps().size() == run.steps.size());
    for (const ExecutedStep& s : clock.steps()) {
      CHECK(s.wall > 0);
      CHECK(s.device > 0);
      CHECK(s.device <= s.wall);
    }
    // Chunks of 8 while earlier requests decode: some step mixes decodes and a chunk.
    bool mixed = false;
    for (const StepRecord& s : run.steps) mixed = mixed || (s.decodes > 0 && s.prefill_tokens > 0);
    CHECK(mixed);
    CHECK(session->held_bytes() > 0);
  }
}

TEST_CASE("cpu engine: an executed run decodes speculatively, each verify pass sampling its every row") {
  const ModelConfig m = test_models::tiny_llama();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 4; ++i) requests.push_back(test::request(i, 0.0, 6 + 2 * i, 9 + i));
  SchedulerConfig c = paged_continuous();
  c.speculative = 3;
  c.acceptance = 0.6;
  const KvPool pool = small_pool();
  cpu::CpuBackend backend;
  const auto session = backend.open_engine(seed);
  ExecutedClock clock(*session, m, {}, pool, 1);
  const EngineRun run = run_engine(requests, c, pool, m.max_seq, 0, clock);
  for (const RequestRecord& r : run.requests) {
    CHECK(r.rejected.empty());
    CHECK(r.generated == r.request.output);
  }
  CHECK(run.verifies > 0);
  CHECK(run.accepted > 0);
  CHECK(run.accepted < run.proposed);
  // Fewer steps than tokens: the verify passes yielded several tokens each.
  int64_t tokens = 0;
  for (const Request& r : requests) tokens += r.output;
  CHECK(static_cast<int64_t>(run.steps.size()) < tokens);
  // The predicted run of the same traffic accepts the same drafts (drawn per request).
  class Instant final : public StepClock {
   public:
    [[nodiscard]] double now() const override { return t; }
    void wait_until(double u) override { t = std::max(t, u); }
    void run(const EngineStep&) override { t += 1e-3; }
    double t = 0;
  } instant;
  const EngineRun predicted = run_engine(requests, c, pool, m.max_seq, 0, instant);
  CHECK(predicted.accepted == run.accepted);
  CHECK(predicted.verifies == run.verifies);
}

TEST_CASE("cpu engine: a step timed op by op gives each op its time and the same logits") {
  const ModelConfig m = test_models::tiny_llama();
  const std::vector<int32_t> ids = ids_of(12, 5);
  const auto step = engine_step(m, {{ids, 0, 12, {3, 1, 6}, true}}, 4, 8);
  cpu::CpuBackend backend;
  const auto session = backend.open_engine(seed);
  const StepTimes plain = session->run_step(step.first, step.second);
  CHECK(plain.ops.empty());
  const StepTimes t = session->run_step_ops(step.first, step.second);
  REQUIRE(t.ops.size() == step.first.ops.size());
  double sum = 0;
  for (double s : t.ops) {
    CHECK(s >= 0);
    sum += s;
  }
  CHECK(sum > 0);
  CHECK(sum <= t.wall);
}
