// Several engines (data-parallel replicas, each its own GPU, KV pool and scheduler) behind a
// router that sends each arriving request to one of them, as vLLM's and SGLang's routers or a
// llm-d gateway do. The engines run interleaved in time (engine_loop.hpp), so a router that
// reads their state sees it as of the request's arrival.
#pragma once
#include <cstdint>
#include <vector>

#include "core/serve/engine.hpp"

namespace perfsim {

struct ReplicasRun {
  EngineRun merged;                 // every request by id; the steps of every replica, in replica order
  std::vector<EngineRun> replicas;  // behind a router: each replica's own requests (in id order), steps and gaps
  std::vector<int> replica_of;      // by request id: where the router sent it
};

// Runs `requests` on one engine per clock (all with `config` and `pool`), each arrival routed
// by `policy`. With `group` > 1, each replica is `group` consecutive engines (a pipeline of that
// many stages runs as many batches in flight, each engine one of them): the policy picks the
// replica, then the replica's engine with the fewest outstanding requests (for `prefix`, the
// one holding the longest prefix) takes it; results are per replica. Closed-loop requests (Request::user >= 0) arrive `think` seconds after their
// client's previous request finished, on whichever replica it finished; the first of each
// client at 0. Requests longer than max_seq or than a pool are refused (recorded).
[[nodiscard]] ReplicasRun run_replicas(const std::vector<Request>& requests, const SchedulerConfig& config,
                                       const KvPool& pool, int64_t max_seq, double think,
                                       const std::vector<StepClock*>& clocks, RouterPolicy policy, int group = 1);

}  // namespace perfsim
