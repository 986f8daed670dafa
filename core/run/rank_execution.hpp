// Executing a parallel layout for real: this process is one rank of a run of
// several (mpirun, srun, `perfsim run --gpus N`); it runs its own rank graph on
// its device, the graph's collectives go between the ranks, and rank 0 gathers
// every rank's figures.
#pragma once
#include <string>
#include <vector>

#include "core/parallel/plan.hpp"
#include "core/run/backend.hpp"
#include "core/run/communicator.hpp"
#include "core/run/results.hpp"

namespace perfsim {

// Seconds a rank may spend executing one step unless told otherwise (--rank-timeout): a peer
// lost or stuck in a collective is bounded by neither MPI nor NCCL, so this is.
inline constexpr double default_rank_timeout_s = 900;

// Empty when `ranks` can execute `layout`; otherwise why not (the same on every
// rank).
[[nodiscard]] std::string layout_unexecutable_reason(const ParallelSpec& layout, const Communicator& ranks);

// The pipeline stage global rank `rank` runs under `layout` (stages outermost).
[[nodiscard]] int stage_of_rank(const ParallelSpec& layout, int rank);

// Runs this rank's graph of `stages` (one per pipeline stage) on `backend` and
// fills r.measured (this rank's ops; step time and wall the slowest rank's)
// and, on rank 0, r.rank_measured with every rank's figures. Deterministic
// refusals (an op the backend cannot run, a graph that does not fit) set
// r.not_executed on every rank alike; a failure while running throws, and the
// caller must end every rank (Communicator::abort).
void execute_on_ranks(StepResult& r, const std::vector<RankGraph>& stages, const ParallelSpec& layout, Backend& backend,
                      Communicator& ranks, const DeviceInfo& device, RunOptions o, double timeout_s = 0);

}  // namespace perfsim
