// Runs one graph op on the CPU kernels: derives its shapes, stages operands whose storage
// differs from what the kernel takes (converted copies counted as transient activations),
// and calls the kernel for the op's storage type.
#pragma once
#include <vector>

#include "backends/cpu/buffer.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cpu {

// buffers[id] holds tensor id's data (allocated by the caller for every operand of op);
// transient scratch comes from `alloc` and is returned before this returns. `rank`: the global
// rank executing the op, which says a context-parallel op's rows (backends/ops/context_parallel.hpp).
void execute_op(const Op& op, const Graph& g, const std::vector<void*>& buffers,
                TrackingAllocator& alloc, int rank = 0);

}  // namespace perfsim::cpu
