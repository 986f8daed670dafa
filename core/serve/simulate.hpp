// The predicted serving run: the engine loop (engine.hpp) on a virtual clock whose steps take
// the cost model's price (step_price.hpp), over a KV pool sized from the memory model.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/serve/engine.hpp"
#include "core/serve/metrics.hpp"
#include "core/serve/step_price.hpp"
#include "core/config/model.hpp"

namespace perfsim {

// A virtual clock: waiting jumps to the time, a step lasts its price.
class PricedClock final : public StepClock {
 public:
  explicit PricedClock(StepPricer& pricer) : m_pricer(pricer) {}
  [[nodiscard]] double now() const override { return m_now; }
  void wait_until(double t) override { m_now = std::max(m_now, t); }
  void run(const EngineStep& step) override { m_now += m_pricer.price(step); }

 private:
  StepPricer& m_pricer;
  double m_now = 0;
};

// The KV pool of an engine: gpu_memory × the device's memory, less what the engine holds
// besides the cache at its largest step, in blocks (paged: `block` tokens; otherwise one
// max_seq reservation per block). Throws ConfigError when not one sequence fits.
[[nodiscard]] KvPool kv_pool(StepPricer& pricer, const SchedulerConfig& c, const Hardware& hw, int64_t max_seq,
                             const std::string& model);

// One replica's share of a run behind a router.
struct ReplicaSummary {
  ServeMetrics metrics;  // over the requests the router sent it (durations from the run's start)
  EngineRun run;         // those requests and the replica's steps
  std::string role;      // disaggregated: "prefill" or "decode" ("" otherwise)
};

// A disaggregated run's KV transfers (disaggregated.hpp), by request id.
struct KvTransfers {
  std::vector<double> seconds;  // the transfer of its prompt's KV (-1: refused before it)
  std::vector<double> exposed;  // of it, what came after the prompt's last prefill step
  std::vector<int> prefill_of;  // the prefill engine it ran on (-1: refused)
  std::vector<double> prefilled;  // when its prefill ended: its first token on the prefill engine
  double bytes_per_token = 0;   // one GPU's share of a token's K/V
  std::string link;             // "NVLink", "network", or "host memory" (ranks of one CPU host)
};

struct ServePrediction {
  SchedulerConfig config;
  ParallelSpec layout;   // dp replicas of tp × pp GPUs each
  KvPool pool;           // each replica's (with pp stages, shared out among its pp batches in flight)
  EngineRun run;         // every request; the steps of every replica
  ServeMetrics metrics;  // the whole service
  std::vector<ReplicaSummary> replicas;  // with config.replicas > 1
  std::vector<int> replica_of;           // with config.replicas > 1: by request id, where it was sent
                                         // (disaggregated: its decode engine, numbered after the prefill ones)
  std::optional<KvTransfers> transfers;  // disaggregated prefill and decode
  double seconds = 0;      // host seconds the simulation took
  int64_t graph_builds = 0;
};

// A serving layout in words: "one engine on 1 GPU", "one TP2 engine (2 GPUs)", "4 replicas of
// TP2 × PP2 engines (16 GPUs)", "4 replicas (4 GPUs)".
[[nodiscard]] std::string describe_engine_layout(const ParallelSpec& p);
// A predicted service in words (its layout: describe_engine_layout's, or "1P1D, TP2 engines" for
// a disaggregated one) and the GPUs it takes (every engine's).
struct ServiceWords {
  std::string layout;
  int gpus = 1;
};

[[nodiscard]] ServiceWords describe_service(const ServePrediction& p);

// Predicts stack step `upto` of a serving scenario on `hw` for `requests`, served by
// `layout.dp` engines behind the stack's router, each over layout.tp × layout.pp GPUs. An engine
// of pp > 1 stages keeps pp batches in flight, as vLLM's pipeline-parallel engine does: pp
// engine loops each holding 1/pp of its KV pool, every step lasting the pipeline's latency
// (the sum of its stages).
[[nodiscard]] ServePrediction predict_serving(const ModelConfig& m, const Hardware& hw, const ServeSpec& spec,
                                              const std::vector<Request>& requests,
                                              const std::vector<StackStep>& stack, std::size_t upto,
                                              const ParallelSpec& layout = {});

}  // namespace perfsim
