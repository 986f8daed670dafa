#include "core/serve/simulate.hpp"

#include <fmt/format.h>

#include <chrono>
#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/serve/disaggregated.hpp"
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

std::string describe_engine_layout(const ParallelSpec& p) {
  const int dp = std::max(1, p.dp), tp = std::max(1, p.tp), pp = std::max(1, p.pp);
  const std::string engine = tp * pp > 1 ? engine_words(tp, pp) : "";
  const int gpus = dp * tp * pp;
  const std::string count = fmt::format("{} GPU{}", gpus, gpus == 1 ? "" : "s");
  if (dp == 1) return engine.empty() ? "one engine on 1 GPU" : fmt::format("one {} engine ({})", engine, count);
  return engine.empty() ? fmt::format("{} replicas ({})", dp, count)
                        : fmt::format("{} replicas of {} engines ({})", dp, engine, count);
}

ServiceWords describe_service(const ServePrediction& p) {
  const SchedulerConfig& c = p.config;
  const int engine_gpus = std::max(1, p.layout.tp) * std::max(1, p.layout.pp);
  ServiceWords w;
  w.gpus = (c.disaggregated() ? c.prefill_engines + c.decode_engines : std::max(1, p.layout.dp)) * engine_gpus;
  if (c.disaggregated()) {
    w.layout = fmt::format("{}P{}D, {} engines", c.prefill_engines, c.decode_engines,
                           engine_gpus > 1 ? engine_words(p.layout.tp, p.layout.pp) : "1-GPU");
  } else {
    w.layout = describe_engine_layout(p.layout);
  }
  return w;
}

ServePrediction predict_serving(const ModelConfig& m, const Hardware& hw, const ServeSpec& spec,
                                const std::vector<Request>& requests, const std::vector<StackStep>& stack,
                                std::size_t upto, const ParallelSpec& layout) {
  const auto start = std::chrono::steady_clock::now();
  ServePrediction out;
  out.config = scheduler_config(stack, upto);
  out.layout.dp = std::max(1, layout.dp);
  out.layout.tp = std::max(1, layout.tp);
  out.layout.pp = std::max(1, layout.pp);
  out.config.replicas = out.layout.dp;
  out.config.tp = out.layout.tp;
  out.config.pp = out.layout.pp;
  StepPricer pricer(m, hw, stack, upto, out.layout);
  out.pool = kv_pool(pricer, out.config, hw, m.max_seq, m.name);
  pricer.set_swap_block_bytes(out.pool.block_bytes);
  if (out.config.disaggregated()) {
    if (out.layout.dp > 1)
      throw ConfigError(fmt::format("dp = {} with prefill_engines and decode_engines: a disaggregated service's "
                                    "engines are its prefill_engines + decode_engines; leave dp = 1",
                                    out.layout.dp));
    out = predict_disaggregated(m, hw, spec, requests, std::move(out), pricer);
    out.graph_builds = pricer.graph_builds();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }
  // The batches a replica keeps in flight, each an engine loop with its share of the pool.
  const int in_flight = out.layout.pp;
  KvPool share = out.pool;
  share.blocks = out.pool.blocks / in_flight;
  if (share.blocks < 1)
    throw DoesNotFit(fmt::format("{} on {}: the KV pool of {} blocks cannot hold a block for each of the pp = {} "
                                 "batches in flight; use fewer stages or more memory",
                                 m.name, hw.name, out.pool.blocks, in_flight));
  // Every engine prices its steps alike: one pricer (and its built graphs), a clock each.
  std::vector<PricedClock> clocks(static_cast<std::size_t>(out.config.replicas * in_flight), PricedClock(pricer));
  std::vector<StepClock*> engines;
  for (PricedClock& c : clocks) engines.push_back(&c);
  ReplicasRun run = run_replicas(requests, out.config, share, m.max_seq, spec.arrivals.think, engines,
                                 out.config.router, in_flight);
  if (in_flight > 1) {
    // Report the replica's whole pool (its loops' shares summed).
    run.merged.pool = out.pool;
    for (EngineRun& r : run.replicas) r.pool = out.pool;
  }
  out.run = std::move(run.merged);
  out.metrics = serve_metrics(out.run, spec.slo);
  if (out.config.replicas > 1) {
    for (EngineRun& r : run.replicas) {
      ServeMetrics rm = serve_metrics(r, spec.slo);
      out.replicas.push_back({std::move(rm), std::move(r), ""});
    }
    out.replica_of = std::move(run.replica_of);
  }
  out.graph_builds = pricer.graph_builds();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace perfsim
