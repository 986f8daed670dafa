// The executed serving engine's step graph: build_engine_step (core/builders) with the graph
// passes of the stack. The engine runs it (core/run/engine_clock.hpp) and the step price reads
// its decode attention from it (step_price.hpp), so both see the same ops.
#pragma once
#include <cstddef>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/config/model.hpp"
#include "core/passes/passes.hpp"

namespace perfsim {

// The graph passes of stack steps 0..upto that the executed engine's step graphs take: the
// precision and fusion passes. Its attention is always the paged varlen flash attention
// (flash_attention and paged_kv are built in), the serving knobs steer the scheduler, and
// cuda_graphs is the session's to honour.
[[nodiscard]] std::vector<StackStep> engine_graph_stack(const std::vector<StackStep>& stack, std::size_t upto);
// An engine step's graph (build_engine_step) with `graph_stack`'s passes applied.
[[nodiscard]] Graph engine_step_graph(const ModelConfig& m, const EngineStepShape& shape,
                                      const std::vector<StackStep>& graph_stack, const BuildOptions& options = {});

}  // namespace perfsim
