// Replicas of a serving engine executed on ranks (mpirun, srun, perfsim run --gpus N): each rank
// serves, on its own device and wall clock, the requests the predicted run's router sent its
// replica; rank 0 gathers every rank's run and joins them as the predicted run joins its
// replicas. What one rank sends to rank 0 is packed as text (the Communicator moves text).
#pragma once
#include <string>
#include <vector>

#include "core/run/results.hpp"

namespace perfsim {

// One rank's executed replica: its run (requests numbered 0..k−1 in its own order), the
// request ids of the whole run they stand for, and its measured steps.
struct ReplicaShare {
  std::vector<int64_t> ids;  // by the rank's request index: the request's id in the whole run
  ServeStepResult::Executed executed;
  std::string not_executed;  // why this rank did not run ("" = it did)
};

[[nodiscard]] std::string pack_replica(const ReplicaShare& share);
// Throws std::runtime_error on text pack_replica did not write.
[[nodiscard]] ReplicaShare unpack_replica(const std::string& text);

// The service's executed run from each replica's share, in replica order: requests by id
// (`requests` is the whole run's), steps and gaps of every replica, each replica's own metrics.
[[nodiscard]] ServeStepResult::Executed join_replicas(const std::vector<ReplicaShare>& shares,
                                                      const std::vector<Request>& requests, const KvPool& pool,
                                                      const Slo& slo);

}  // namespace perfsim
