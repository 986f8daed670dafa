#include "core/serve/simulate.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "core/errors.hpp"
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
  if (pool.blocks < 1)
    throw ConfigError(fmt::format(
        "{} on {}: weights and activations take {} of the {} the engine may use (gpu_memory = {}): no room for "
        "one sequence's KV cache ({}); use a larger GPU, fp8, fp8_kv, paged_kv, or a smaller max_tokens",
        model, hw.name, format_bytes(besides), format_bytes(c.gpu_memory * hw.memory_bytes), c.gpu_memory,
        format_bytes(pool.block_bytes)));
  return pool;
}

ServePrediction predict_serving(const ModelConfig& m, const Hardware& hw, const ServeSpec& spec,
                                const std::vector<Request>& requests, const std::vector<StackStep>& stack,
                                std::size_t upto) {
  const auto start = std::chrono::steady_clock::now();
  ServePrediction out;
  out.config = scheduler_config(stack, upto);
  StepPricer pricer(m, hw, stack, upto);
  out.pool = kv_pool(pricer, out.config, hw, m.max_seq, m.name);
  pricer.set_swap_block_bytes(out.pool.block_bytes);
  PricedClock clock(pricer);
  out.run = run_engine(requests, out.config, out.pool, m.max_seq, spec.arrivals.think, clock);
  out.metrics = serve_metrics(out.run, spec.slo);
  out.graph_builds = pricer.graph_builds();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace perfsim
