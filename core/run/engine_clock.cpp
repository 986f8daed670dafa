#include "core/run/engine_clock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/errors.hpp"
#include "core/run/engine_step_message.hpp"

namespace perfsim {

EngineStepPlan plan_engine_step(const EngineStep& step, const KvPool& pool, int64_t table_width, int64_t vocab,
                                std::mt19937_64& tokens) {
  if (step.block_tables.size() != step.seqs.size())
    throw std::logic_error("engine step: the clock needs every sequence's block table");
  // Decodes first, each group in the scheduler's order.
  std::vector<std::size_t> order(step.seqs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return step.seqs[i].decodes(); });

  EngineStepPlan plan;
  EngineStepShape& sh = plan.shape;
  sh.pool_blocks = pool.blocks;
  sh.kv_block = pool.block;
  sh.table_width = table_width;
  std::vector<int32_t> ids, positions, slots, table, query_start{0}, kv_len, sample_rows;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  for (std::size_t i : order) {
    const SeqWork& w = step.seqs[i];
    const std::vector<int64_t>& blocks = step.block_tables[i];
    const int64_t kv = w.position + w.tokens;
    sh.q_len.push_back(w.tokens);
    sh.kv_len.push_back(kv);
    for (int64_t j = w.position; j < kv; ++j) {
      ids.push_back(token(tokens));
      positions.push_back(static_cast<int32_t>(j));
      const auto b = static_cast<std::size_t>(j / pool.block);
      slots.push_back(b < blocks.size() ? static_cast<int32_t>(blocks[b] * pool.block + j % pool.block) : -1);
    }
    for (int64_t c = 0; c < table_width; ++c)
      table.push_back(static_cast<std::size_t>(c) < blocks.size() ? static_cast<int32_t>(blocks[static_cast<std::size_t>(c)]) : 0);
    query_start.push_back(query_start.back() + static_cast<int32_t>(w.tokens));
    kv_len.push_back(static_cast<int32_t>(kv));
    // A sampling sequence's last row; a speculative verify's every row (its drafts' checks).
    if (w.samples)
      for (int64_t r = w.proposed; r >= 0; --r) sample_rows.push_back(query_start.back() - 1 - static_cast<int32_t>(r));
  }
  sh.sampled = static_cast<int64_t>(sample_rows.size());
  plan.inputs = {{engine_input::tokens, std::move(ids)},
                 {engine_input::positions, std::move(positions)},
                 {engine_input::slots, std::move(slots)},
                 {engine_input::block_table, std::move(table)},
                 {engine_input::query_start, std::move(query_start)},
                 {engine_input::kv_len, std::move(kv_len)}};
  if (sh.sampled > 0) plan.inputs.emplace_back(engine_input::sample_rows, std::move(sample_rows));
  return plan;
}

EngineStepPlan plan_graphed_step(const EngineStep& step, const KvPool& pool, int64_t table_width, int64_t vocab,
                                 std::mt19937_64& tokens, int64_t bucket, int64_t max_kv) {
  EngineStepPlan plan = plan_engine_step(step, pool, table_width, vocab, tokens);
  auto values = [&](const char* name) -> std::vector<int32_t>& {
    for (auto& in : plan.inputs)
      if (in.first == name) return in.second;
    throw std::logic_error(std::string("engine step: no input ") + name);
  };
  EngineStepShape& sh = plan.shape;
  for (auto n = static_cast<int64_t>(sh.q_len.size()); n < bucket; ++n) {
    sh.q_len.push_back(1);
    values(engine_input::tokens).push_back(0);
    values(engine_input::positions).push_back(1);
    values(engine_input::slots).push_back(-1);
    for (int64_t c = 0; c < table_width; ++c) values(engine_input::block_table).push_back(0);
    std::vector<int32_t>& starts = values(engine_input::query_start);
    starts.push_back(starts.back() + 1);
    values(engine_input::kv_len).push_back(2);
  }
  if (sh.sampled < bucket) {
    // Every row samples (vLLM computes the padded rows' logits too).
    std::vector<int32_t> rows(static_cast<std::size_t>(bucket));
    for (int64_t i = 0; i < bucket; ++i) rows[static_cast<std::size_t>(i)] = static_cast<int32_t>(i);
    bool found = false;
    for (auto& in : plan.inputs)
      if (in.first == engine_input::sample_rows) in.second = rows, found = true;
    if (!found) plan.inputs.emplace_back(engine_input::sample_rows, std::move(rows));
    sh.sampled = bucket;
  }
  sh.kv_len.assign(static_cast<std::size_t>(bucket), max_kv);
  return plan;
}

ExecutedClock::ExecutedClock(EngineSession& session, const ModelConfig& m, std::vector<StackStep> graph_stack,
                             const KvPool& pool, uint64_t seed, bool cuda_graphs, const BuildOptions& options,
                             Communicator* followers)
    : m_session(session), m_model(m), m_options(options), m_followers(followers), m_stack(std::move(graph_stack)),
      m_cuda_graphs(cuda_graphs), m_pool(pool),
      m_table_width((m.max_seq + pool.block - 1) / pool.block), m_tokens(seed),
      m_start(std::chrono::steady_clock::now()) {
  m_session.forget_graphs();
}

ExecutedClock::~ExecutedClock() {
  if (m_followers == nullptr) return;
  std::string stop;
  broadcast_text(*m_followers, stop);
}

void ExecutedClock::lead(const EngineStepShape& shape, const StepInputs& inputs, int64_t graph_key) {
  if (m_followers == nullptr) return;
  std::string bytes = pack_step_message({graph_key, shape, inputs});
  broadcast_text(*m_followers, bytes);
}

void ExecutedClock::led(const std::function<void()>& run) const {
  if (m_followers == nullptr) return run();
  auto fatal = [](const std::exception& e) {
    return std::runtime_error(
        fmt::format("rank 0 failed a tensor-parallel engine step the other ranks had begun: {}", e.what()));
  };
  try {
    run();
  } catch (const NotExecutable& e) {
    throw fatal(e);
  } catch (const ConfigError& e) {
    throw fatal(e);
  }
}

void follow_engine(EngineSession& session, const ModelConfig& m, const std::vector<StackStep>& graph_stack,
                   const BuildOptions& options, Communicator& ranks) {
  session.forget_graphs();
  std::set<int64_t> captured;
  for (;;) {
    std::string bytes;
    broadcast_text(ranks, bytes);
    if (bytes.empty()) return;
    const EngineStepMessage step = unpack_step_message(bytes);
    if (step.graph_key == 0) {
      (void)session.run_step(engine_step_graph(m, step.shape, graph_stack, options), step.inputs);
      continue;
    }
    // Rank 0 replays its graph of this key: so does this rank, its all-reduces meeting rank 0's
    // inside the graphs. After a capture, rank 0 waits at a barrier for this one's.
    double capture = 0;
    (void)session.run_graphed(
        step.graph_key, [&] { return engine_step_graph(m, step.shape, graph_stack, options); }, step.inputs, capture);
    if (captured.insert(step.graph_key).second) ranks.barrier();
  }
}

void ExecutedClock::prime(int64_t tokens) {
  tokens = std::max<int64_t>(1, tokens);
  const int64_t longest = std::max<int64_t>(1, std::min(tokens, m_model.max_seq - 1));
  // Prompts holding no blocks: their K/V rows go nowhere (slot −1) and they read page 0.
  EngineStep step;
  for (int64_t left = tokens; left > 0; left -= longest) {
    SeqWork w;
    w.tokens = std::min(left, longest);
    step.seqs.push_back(w);
    step.block_tables.emplace_back();
  }
  const EngineStepPlan plan = plan_engine_step(step, m_pool, m_table_width, m_model.vocab, m_tokens);
  lead(plan.shape, plan.inputs, 0);
  led([&] { (void)m_session.run_step(step_graph(plan.shape), plan.inputs); });
  m_start = std::chrono::steady_clock::now();
}

double ExecutedClock::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
}

void ExecutedClock::wait_until(double t) {
  std::this_thread::sleep_until(m_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(t)));
}

Graph ExecutedClock::step_graph(const EngineStepShape& shape) const {
  return engine_step_graph(m_model, shape, m_stack, m_options);
}

void ExecutedClock::run(const EngineStep& step) {
  const double t0 = now();
  const auto n = static_cast<int64_t>(step.seqs.size());
  const bool decodes_only =
      std::all_of(step.seqs.begin(), step.seqs.end(), [](const SeqWork& w) { return w.decodes(); });
  const int64_t bucket = m_cuda_graphs && decodes_only ? StepPricer::capture_size(n) : 0;
  ExecutedStep rec;
  const double swap_out = static_cast<double>(step.swap_out_blocks) * m_pool.block_bytes;
  const double swap_in = static_cast<double>(step.swap_in_blocks) * m_pool.block_bytes;
  double swaps = 0;
  if (swap_in > 0) swaps += m_session.swap(swap_in, false);
  StepTimes t;
  double capture = 0;
  if (bucket > 0) {
    const int64_t max_kv = std::min(m_model.max_seq, m_table_width * m_pool.block);
    const EngineStepPlan plan =
        plan_graphed_step(step, m_pool, m_table_width, m_model.vocab, m_tokens, bucket, max_kv);
    lead(plan.shape, plan.inputs, bucket);
    led([&] { t = m_session.run_graphed(bucket, [&] { return step_graph(plan.shape); }, plan.inputs, capture); });
    if (m_captured.insert(bucket).second && m_followers != nullptr) {
      // The other ranks captured theirs too: their capture is set-up as well, so the clock
      // waits for it stopped (follow_engine meets this barrier after its capture).
      const auto b0 = std::chrono::steady_clock::now();
      m_followers->barrier();
      capture += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    }
  } else {
    const EngineStepPlan plan = plan_engine_step(step, m_pool, m_table_width, m_model.vocab, m_tokens);
    lead(plan.shape, plan.inputs, 0);
    led([&] { t = m_session.run_step(step_graph(plan.shape), plan.inputs); });
  }
  if (swap_out > 0) swaps += m_session.swap(swap_out, true);
  // A capture is set-up, not serving: the clock stops for it.
  m_start += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(capture));
  rec.wall = now() - t0;
  rec.device = t.device + swaps;
  rec.host = std::max(0.0, rec.wall - rec.device);
  m_steps.push_back(rec);
  if (m_handoff) {
    const auto h0 = std::chrono::steady_clock::now();
    m_handoff(step);
    m_start += std::chrono::steady_clock::now() - h0;
  }
  // Priced after the run (price_steps), so the cost model's work does not delay the engine.
  EngineStep kept = step;
  kept.block_tables.clear();
  m_ran.push_back(std::move(kept));
}

void ExecutedClock::price_steps(StepPricer& pricer) {
  for (std::size_t i = 0; i < m_ran.size(); ++i) {
    m_steps[i].predicted = pricer.price(m_ran[i]);
    m_steps[i].predicted_host = pricer.host(m_ran[i]);
  }
}

}  // namespace perfsim
