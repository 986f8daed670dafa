// A serving scenario's stack step executed on the backend's engine session, on the wall clock:
// one engine on this device; replicas one a rank; one tensor-parallel engine over the ranks; or
// a prefill engine and a decode engine on two ranks (1P1D). Each returns the executed run
// (on rank 0 for the ones on ranks), or nullopt with why it was not made.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/run/backend.hpp"
#include "core/run/communicator.hpp"
#include "core/run/results.hpp"
#include "core/run/scenario.hpp"

namespace perfsim {

// What executing stack step `upto` needs: the same for every rank.
struct ServeExecution {
  const Scenario& scenario;
  EngineSession& session;
  const Hardware& device;                // prices each executed step
  const std::vector<Request>& requests;  // the whole run's
  const std::vector<StackStep>& stack;
  std::size_t upto = 0;
  const ServePrediction& predicted;      // its pool, scheduler and (on ranks) routing
};

using ExecutedServing = std::optional<ServeStepResult::Executed>;

// The way the step executes, from its layout and the ranks (nullptr: one process): one engine
// on this device (on rank 0 under ranks), or one of the ways below; a layout the ranks cannot
// run leaves `why` saying what would run it. Exceptions the backend raises while executing end
// the run (NotExecutable and ConfigError become `why`).
[[nodiscard]] ExecutedServing execute_step(const ServeExecution& x, Communicator* ranks, std::string& why);

// One engine on this device.
[[nodiscard]] ExecutedServing execute_serving(const ServeExecution& x, std::string& why);
// dp one-GPU replicas, one a rank: each rank serves what the predicted router sent its replica.
[[nodiscard]] ExecutedServing execute_replicas(const ServeExecution& x, Communicator& ranks, std::string& why);
// One engine of tp = every rank: rank 0 schedules, every rank runs its share of each step.
[[nodiscard]] ExecutedServing execute_tensor_parallel(const ServeExecution& x, Communicator& ranks, std::string& why);
// 1P1D on two ranks: rank 0 prefills every request and, after the step that ends a prompt,
// sends its KV pages into rank 1's pool (timed, beside the engine); rank 1 then decodes the
// requests as their KV arrived.
[[nodiscard]] ExecutedServing execute_disaggregated(const ServeExecution& x, Communicator& ranks, std::string& why);

}  // namespace perfsim
