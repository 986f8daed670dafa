// FLOPs and bytes each op performs and moves, derived from its shapes and dtypes.
// These are per single op (not multiplied by Op::count).
#pragma once
#include "core/graph.hpp"

namespace perfsim {

// Floating-point operations (a fused multiply-add counts 2).
[[nodiscard]] double op_flops(const Op& op, const Graph& g);
// Bytes read + written from memory by an ideal kernel (each operand touched once per pass).
[[nodiscard]] double op_bytes(const Op& op, const Graph& g);
// Sum of op_flops × count over the graph (the whole step, all layers).
[[nodiscard]] double graph_flops(const Graph& g);

}  // namespace perfsim
