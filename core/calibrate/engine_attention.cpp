#include "core/calibrate/engine_attention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "core/errors.hpp"
#include "core/run/engine_clock.hpp"
#include "core/statistics.hpp"

namespace perfsim {

namespace {

constexpr int64_t block = 16;
constexpr int warm_steps = 1, timed_steps = 5;

int64_t blocks_of(const EngineAttentionCase& c) { return c.seqs * ((c.context + block - 1) / block); }

std::vector<StackStep> engine_stack(bool fp8_kv) {
  std::vector<StackStep> s = {{"+bf16", {PassSpec{"bf16", std::nullopt}}, ""}};
  if (fp8_kv) s.push_back({"+fp8_kv", {PassSpec{"fp8_kv", std::nullopt}}, ""});
  return s;
}

// One decode step of the case: each sequence's pages drawn at random from the pool (page 0
// left for padding), as a long-running engine's block manager leaves them.
EngineStep decode_step(const EngineAttentionCase& c, int64_t pool_blocks, std::mt19937_64& rng) {
  std::vector<int64_t> free(static_cast<std::size_t>(pool_blocks - 1));
  std::iota(free.begin(), free.end(), int64_t{1});
  std::shuffle(free.begin(), free.end(), rng);
  EngineStep step;
  const int64_t per_seq = (c.context + block - 1) / block;
  for (int64_t s = 0; s < c.seqs; ++s) {
    SeqWork w;
    w.request = s, w.tokens = 1, w.position = c.context - 1;
    step.seqs.push_back(w);
    step.block_tables.emplace_back(free.begin() + s * per_seq, free.begin() + (s + 1) * per_seq);
  }
  return step;
}

}  // namespace

void sweep_engine_attention(const SweepContext& ctx, double launch_graph, CurveFitter& fit, SweepSummary& out) {
  out.sweep = "engine attention";
  const std::vector<EngineAttentionCase>& cases = ctx.plan.engine_attention;
  if (cases.empty()) {
    out.fitted = "skipped: no cases in this plan";
    return;
  }
  // One session per model and cache precision: its weights and page pool (sized for the
  // group's largest step) are made once and kept across the group's steps.
  std::map<std::pair<std::string, bool>, std::vector<const EngineAttentionCase*>> groups;
  for (const EngineAttentionCase& c : cases) groups[{c.model.name, c.fp8_kv}].push_back(&c);
  SweepClock clock(ctx, out.sweep, static_cast<int>(cases.size()));
  std::mt19937_64 rng(ctx.plan.run.seed);
  int points = 0;
  std::vector<std::string> skipped;
  for (const auto& [key, group] : groups) {
    std::unique_ptr<EngineSession> session;
    try {
      session = ctx.backend.open_engine(ctx.plan.run.seed);
    } catch (const NotExecutable& e) {
      out.fitted = fmt::format("skipped: {}", e.what());
      return;
    }
    int64_t most = 0;
    for (const EngineAttentionCase* c : group) most = std::max(most, blocks_of(*c));
    KvPool pool;
    pool.block = block;
    pool.blocks = most + 1;
    const std::vector<StackStep> stack = engine_stack(key.second);
    for (const EngineAttentionCase* c : group) {
      const ModelConfig& m = c->model;
      const int64_t table_width = (m.max_seq + block - 1) / block;
      const EngineStepPlan plan = plan_engine_step(decode_step(*c, pool.blocks, rng), pool, table_width, m.vocab, rng);
      Graph g;
      std::vector<std::vector<double>> samples;
      // A step the engine or this backend cannot run (a model it refuses, a head size its
      // kernels lack) is skipped and named; the others still count. Device faults end the sweep.
      auto skip = [&](const std::exception& e) {
        skipped.push_back(fmt::format("{} {}x{}{}: {}", m.name, c->seqs, c->context, c->fp8_kv ? " fp8" : "", e.what()));
        clock.step();
      };
      try {
        g = engine_step_graph(m, plan.shape, stack);
        samples.resize(g.ops.size());
        for (int i = 0; i < warm_steps + timed_steps; ++i) {
          const StepTimes t = session->run_step_ops(g, plan.inputs);
          if (i < warm_steps) continue;
          for (std::size_t op = 0; op < g.ops.size() && op < t.ops.size(); ++op) samples[op].push_back(t.ops[op]);
        }
      } catch (const NotExecutable& e) {
        skip(e);
        continue;
      } catch (const ConfigError& e) {
        skip(e);
        continue;
      }
      // Only the attention: the step's other ops are the kernel cases' (timed in graphs there).
      Measurement meas;
      meas.ops.resize(g.ops.size());
      for (std::size_t op = 0; op < g.ops.size(); ++op) {
        meas.ops[op].op = static_cast<int>(op);
        if (g.ops[op].kind != OpKind::varlen_flash_attention || samples[op].empty()) continue;
        meas.ops[op].median = median_or_zero(samples[op]);
        meas.ops[op].executed = meas.ops[op].median > 0;
        points += meas.ops[op].executed ? 1 : 0;
      }
      fit.add(g, meas, ctx.base, launch_graph,
              fmt::format("{} engine decode {}x{}{}", m.name, c->seqs, c->context, c->fp8_kv ? " +fp8_kv" : ""));
      ++out.graphs;
      clock.step();
    }
  }
  out.seconds = clock.seconds();
  out.fitted = fmt::format("{} varlen decode attention points ({} steps)", points, out.graphs);
  if (!skipped.empty()) out.fitted += fmt::format("; {} steps not run (first: {})", skipped.size(), skipped.front());
}

}  // namespace perfsim
