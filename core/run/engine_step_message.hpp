// A tensor-parallel engine's step as rank 0 sends it to the other ranks (ExecutedClock's
// followers): the step's shape, its inputs, and the CUDA-graph key it replays (0: an eager
// step). Binary, in the ranks' own byte order (every rank runs the same perfsim); an empty
// message says stop.
#pragma once
#include <cstdint>
#include <string>

#include "core/builders/builders.hpp"
#include "core/run/backend.hpp"

namespace perfsim {

struct EngineStepMessage {
  int64_t graph_key = 0;  // EngineSession::run_graphed's key, 0 = run eagerly
  EngineStepShape shape;
  StepInputs inputs;
};

[[nodiscard]] std::string pack_step_message(const EngineStepMessage& m);
// Throws std::runtime_error on a message too short or malformed for its own counts.
[[nodiscard]] EngineStepMessage unpack_step_message(const std::string& bytes);

}  // namespace perfsim
