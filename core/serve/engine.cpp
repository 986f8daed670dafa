// A single engine: the driver of router.cpp with one replica (engine_loop.cpp runs its steps).
#include "core/serve/engine.hpp"

#include "core/serve/router.hpp"

namespace perfsim {

EngineRun run_engine(const std::vector<Request>& requests, const SchedulerConfig& config, const KvPool& pool,
                     int64_t max_seq, double think, StepClock& clock) {
  return run_replicas(requests, config, pool, max_seq, think, {&clock}, RouterPolicy::round_robin).merged;
}

}  // namespace perfsim
