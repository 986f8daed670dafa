// The wall clock of an executed serving run: waiting sleeps until the next arrival, and each
// engine step runs on the backend as one packed graph (core/builders/builders.hpp,
// build_engine_step) whose K/V rows go to the blocks the block manager gave each sequence. The
// engine loop (core/serve/engine.hpp) is the one the prediction runs; only the clock differs.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/passes/passes.hpp"
#include "core/run/backend.hpp"
#include "core/run/communicator.hpp"
#include "core/serve/engine.hpp"
#include "core/serve/engine_graph.hpp"
#include "core/serve/step_price.hpp"

namespace perfsim {

class ExecutedClock final : public StepClock {
 public:
  // `graph_stack`: the stack's graph passes for the step graphs (engine_graph_stack()); with
  // `cuda_graphs`, decode-only steps of up to 512 sequences replay a graph captured for their
  // capture size (StepPricer::capture_size), the clock stopped while one is captured (vLLM
  // captures before serving). `seed` draws the token ids.
  // With `followers` (a tensor-parallel engine over every rank of the world, `options` its
  // layout), each step's plan goes to the other ranks before this one runs it, and they run
  // their share of it beside this one (follow_engine), replaying their own graph of a step
  // this rank replays (its collectives captured in it); they stop when the clock goes.
  ExecutedClock(EngineSession& session, const ModelConfig& m, std::vector<StackStep> graph_stack, const KvPool& pool,
                uint64_t seed, bool cuda_graphs = false, const BuildOptions& options = {},
                Communicator* followers = nullptr);
  ~ExecutedClock() override;
  ExecutedClock(const ExecutedClock&) = delete;
  ExecutedClock& operator=(const ExecutedClock&) = delete;

  // Before serving, as vLLM's start-up profiling run: one eager step of `tokens` prompt tokens
  // (in sequences of up to max_seq − 1, writing no KV rows) makes and fills the weights and
  // KV pages and warms the device's allocator with the largest step's buffers. The clock starts
  // after it.
  void prime(int64_t tokens);

  // Time 0 is now (ranks serving side by side start together after a barrier).
  void restart() { m_start = std::chrono::steady_clock::now(); }

  [[nodiscard]] double now() const override;
  void wait_until(double t) override;
  void run(const EngineStep& step) override;
  [[nodiscard]] bool wants_block_tables() const override { return true; }

  // After each step, `handoff` gets it with its block tables (a disaggregated prefill engine
  // sends the pages of the prompts it ended). The clock stops while it runs: the transfer is
  // priced beside the engine, not in its steps.
  void set_handoff(std::function<void(const EngineStep&)> handoff) { m_handoff = std::move(handoff); }

  [[nodiscard]] const std::vector<ExecutedStep>& steps() const { return m_steps; }
  // Fills each step's `predicted` with the cost model's price of its batch (after the run).
  void price_steps(StepPricer& pricer);

 private:
  // The step's graph with the stack's graph passes.
  [[nodiscard]] Graph step_graph(const EngineStepShape& shape) const;
  // Sends the followers the step to run, eagerly or (graph_key > 0) from their graph of that
  // key (nothing without followers).
  void lead(const EngineStepShape& shape, const StepInputs& inputs, int64_t graph_key);
  // Runs this rank's share of a step it led. With followers, a failure is no longer a step
  // that could not run (NotExecutable, ConfigError, which the run reports and goes on from):
  // the others are inside the step's collectives, so it is rethrown as an error that ends
  // every rank.
  void led(const std::function<void()>& run) const;

  EngineSession& m_session;
  ModelConfig m_model;
  BuildOptions m_options;
  Communicator* m_followers = nullptr;
  std::vector<StackStep> m_stack;
  bool m_cuda_graphs = false;   // decode-only steps replay graphs captured per padded size
  std::set<int64_t> m_captured;  // the padded sizes captured so far (on every rank alike)
  KvPool m_pool;
  int64_t m_table_width = 0;
  std::mt19937_64 m_tokens;
  std::chrono::steady_clock::time_point m_start;
  std::vector<ExecutedStep> m_steps;
  std::function<void(const EngineStep&)> m_handoff;
  std::vector<EngineStep> m_ran;  // the steps as run, for price_steps
};

// A tensor-parallel engine's other ranks: runs each step rank 0's ExecutedClock sends (its
// share of the heads and the MLP, the all-reduces with the others) until rank 0's clock stops.
void follow_engine(EngineSession& session, const ModelConfig& m, const std::vector<StackStep>& graph_stack,
                   const BuildOptions& options, Communicator& ranks);

// The inputs (engine_input names) and the shape of an engine step: sequences reordered with
// the decodes first (the order build_engine_step wants), each new token at its position and
// page slot (−1 where its sequence holds no block for it: a padded sequence of a static
// batch, whose rows are computed and dropped; its table then names page 0).
struct EngineStepPlan {
  EngineStepShape shape;
  StepInputs inputs;
};
[[nodiscard]] EngineStepPlan plan_engine_step(const EngineStep& step, const KvPool& pool, int64_t table_width,
                                              int64_t vocab, std::mt19937_64& tokens);
// A decode-only step padded to `bucket` sequences for a captured CUDA graph (vLLM pads to its
// capture sizes): the padding decodes read page 0 and write nothing; the shape's KV lengths
// are all `max_kv`, so one graph serves every step of the bucket whatever its contexts (the
// kernels read the real ones from the inputs).
[[nodiscard]] EngineStepPlan plan_graphed_step(const EngineStep& step, const KvPool& pool, int64_t table_width,
                                               int64_t vocab, std::mt19937_64& tokens, int64_t bucket, int64_t max_kv);

}  // namespace perfsim
