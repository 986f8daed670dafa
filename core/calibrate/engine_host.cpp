#include "core/calibrate/engine_host.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/errors.hpp"
#include "core/run/engine_clock.hpp"
#include "core/serve/metrics.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

ModelConfig engine_model(int64_t layers) {
  ModelConfig m;
  m.name = fmt::format("engine-host-{}", layers);
  m.layers = layers, m.hidden = 256, m.heads = 4, m.kv_heads = 2;
  m.ffn_hidden = 512, m.vocab = 1024, m.max_seq = 512;
  m.activation = Activation::swiglu;
  m.norm = NormKind::rmsnorm;
  m.rope = true;
  return m;
}

}  // namespace

void sweep_engine_host(const SweepContext& ctx, Hardware& hw, SweepSummary& out) {
  out.sweep = "engine host work";
  hw.engine_host_per_op = 0;
  hw.engine_host_per_step = 0;
  std::unique_ptr<EngineSession> session;
  try {
    session = ctx.backend.open_engine(1);
  } catch (const NotExecutable& e) {
    out.fitted = fmt::format("skipped: {}", e.what());
    return;
  }
  constexpr int warm_steps = 3, timed_steps = 16, seqs = 4;
  SweepClock clock_of_sweep(ctx, out.sweep, 2 * (warm_steps + timed_steps));
  KvPool pool;
  pool.blocks = 2 * seqs + 1;
  pool.block = 16;
  // Per depth: the ops of its step graph and the median host seconds of its timed steps. The
  // fit is the line through the two depths: its slope what each further op costs, its
  // intercept the engine's fixed per-step work, the same at both depths. A noisy (non-positive)
  // slope falls back to the deeper model's host seconds per op, with no fixed part.
  double ops_at[2] = {0, 0}, host_at[2] = {0, 0};
  int depth = 0;
  for (const int64_t layers : {4, 16}) {
    const ModelConfig m = engine_model(layers);
    ExecutedClock clock(*session, m, {{"bf16", {PassSpec{"bf16"}}, ""}}, pool, 1);
    clock.prime(64);
    // Decode steps of `seqs` sequences at contexts 17..: each sequence's two pages its own.
    EngineStep step;
    for (int64_t s = 0; s < seqs; ++s) {
      SeqWork w;
      w.request = s, w.tokens = 1, w.position = 16 + s;
      step.seqs.push_back(w);
      step.block_tables.push_back({2 * s, 2 * s + 1});
    }
    EngineStepShape shape;
    shape.q_len.assign(seqs, 1);
    shape.kv_len.assign(seqs, 20);
    shape.sampled = seqs;
    shape.pool_blocks = pool.blocks;
    shape.kv_block = pool.block;
    shape.table_width = m.max_seq / pool.block;
    const auto ops = static_cast<double>(build_engine_step(m, shape).ops.size());
    for (int i = 0; i < warm_steps + timed_steps; ++i) {
      clock.run(step);
      clock_of_sweep.step();
    }
    std::vector<double> host;
    for (std::size_t i = warm_steps; i < clock.steps().size(); ++i) host.push_back(clock.steps()[i].host);
    std::sort(host.begin(), host.end());
    ops_at[depth] = ops;
    host_at[depth] = percentile_linear(host, 50);
    ++depth;
    ++out.graphs;
  }
  const double slope = (host_at[1] - host_at[0]) / (ops_at[1] - ops_at[0]);
  hw.engine_host_per_op = slope > 0 ? slope : host_at[1] / ops_at[1];
  if (slope > 0) hw.engine_host_per_step = std::max(0.0, host_at[0] - slope * ops_at[0] - hw.host_overhead);
  out.seconds = clock_of_sweep.seconds();
  out.fitted = fmt::format("engine_host_per_op {}, engine_host_per_step {} (eager decode steps: {} per step at {} ops, {} at {} ops)",
                           format_duration(hw.engine_host_per_op), format_duration(hw.engine_host_per_step),
                           format_duration(host_at[0]), ops_at[0], format_duration(host_at[1]), ops_at[1]);
}

}  // namespace perfsim
