// Runs a scenario end to end: for each stack step, build the graph, predict it for every
// hardware of the scenario, and execute it on the backend when one is given.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/run/backend.hpp"
#include "core/run/communicator.hpp"
#include "core/run/rank_execution.hpp"
#include "core/run/results.hpp"
#include "core/run/scenario.hpp"

namespace perfsim {

struct RunnerHooks {
  // Called before step `index` (0-based) of `steps` runs, with its name: for a progress line.
  std::function<void(std::size_t index, std::size_t steps, const std::string& name)> progress;
  // A parallel step that does not fit searches its GPU count for layouts that do (the report
  // names them). Scripts pricing many points turn it off: each search costs up to a second.
  bool find_layouts_that_fit = true;
  // This process is one rank of a parallel run (mpirun, srun, --gpus): a layout of as many GPUs
  // executes across the ranks (rank_execution.hpp); a single-GPU step runs on rank 0 alone.
  Communicator* ranks = nullptr;
  // Seconds a rank may spend executing one step before it ends every rank (a peer lost or
  // stuck in a collective must not hang the run); 0: no limit.
  double rank_timeout_s = default_rank_timeout_s;
};

// A run's header fields from its scenario (scenario, file, description, model and its
// parameters, backend); the caller fills workload, device and the steps.
[[nodiscard]] RunResult run_header(const Scenario& s, const Backend* backend);

// backend == nullptr: predict only. The prediction paired with a measurement is made for the
// executing device's hardware profile (`device_hw`); the scenario's hardware become what-ifs.
[[nodiscard]] RunResult run_scenario(const Scenario& s, Backend* backend, const Hardware* device_hw,
                                     const RunnerHooks& hooks = {});

}  // namespace perfsim
