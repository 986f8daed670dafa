#include "core/serve/simulate.hpp"

#include <fmt/format.h>

#include <chrono>
#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/serve/router.hpp"
#include "core/units.hpp"

namespace perfsim {

KvPool kv_pool(StepPricer& pricer, const SchedulerConfig& c, const Hardware& hw, int64_t max_seq,
               const std::string& model) {
  KvPool pool;
  pool.block = c.paged ? c.block : max_seq;
  pool.block_bytes = pricer.kv_bytes_per_token() * static_cast<double>(pool.block);
  const double besides = pricer.memory_besides_kv(c.step_tokens(max_seq), c.max_batch);
  const double budget = c.gpu_memory * hw.memory_bytes - besides;
  if (hw.memory_bytes <= 0 || pool.block_bytes <= 0)
    throw ConfigError(fmt::format("{} has no memory size to hold a KV cache in", hw.name));
  pool.blocks = budget > 0 ? static_cast<int64_t>(std::floor(budget / pool.block_bytes)) : 0;
  if (pool.blocks < 1) {
    const double per_token = pricer.kv_bytes_per_token();
    throw DoesNotFit(fmt::format(
        "{} on {}: weights and activations take {} of the {} the engine may use (gpu_memory = {}): no room for "
        "the KV cache of one sequence ({} a token, {} for max_seq = {} tokens); use a larger GPU, fp8, fp8_kv, "
        "paged_kv, or a smaller max_tokens",
        model, hw.name, format_bytes(besides), format_bytes(c.gpu_memory * hw.memory_bytes), c.gpu_memory,
        format_bytes(per_token), format_bytes(per_token * static_cast<double>(max_seq)), max_seq));
  }
  return pool;
}

ServePrediction predict_serving(const ModelConfig& m, const Hardware& hw, const ServeSpec& spec,
                                const std::vector<Request>& requests, const std::vector<StackStep>& stack,
                                std::size_t upto, int replicas) {
  const auto start = std::chrono::steady_clock::now();
  ServePrediction out;
  out.config = scheduler_config(stack, upto);
  out.config.replicas = std::max(1, replicas);
  StepPricer pricer(m, hw, stack, upto);
  out.pool = kv_pool(pricer, out.config, hw, m.max_seq, m.name);
  pricer.set_swap_block_bytes(out.pool.block_bytes);
  // Every replica prices its steps alike: one pricer (and its built graphs), a clock each.
  std::vector<PricedClock> clocks(static_cast<std::size_t>(out.config.replicas), PricedClock(pricer));
  std::vector<StepClock*> engines;
  for (PricedClock& c : clocks) engines.push_back(&c);
  ReplicasRun run = run_replicas(requests, out.config, out.pool, m.max_seq, spec.arrivals.think, engines,
                                 out.config.router);
  out.run = std::move(run.merged);
  out.metrics = serve_metrics(out.run, spec.slo);
  if (out.config.replicas > 1) {
    for (EngineRun& r : run.replicas) {
      ServeMetrics rm = serve_metrics(r, spec.slo);
      out.replicas.push_back({std::move(rm), std::move(r)});
    }
    out.replica_of = std::move(run.replica_of);
  }
  out.graph_builds = pricer.graph_builds();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace perfsim
