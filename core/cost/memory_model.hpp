// Predicted memory: a walk over the graph in execution order. Persistent tensors are live
// throughout; an activation is live from the op that writes it to the last op that reads it
// (outputs nobody reads are freed right after their op). Host tensors are not device memory:
// they are reported apart (host_bytes) and never counted in the peak. Given the hardware, the
// walk also holds each op's kernel workspace while it runs (core/cost/workspace.hpp) and the
// workspaces a GPU backend keeps all step, reported under TensorRole::workspace.
#pragma once
#include <map>
#include <string>

#include "core/cost/hardware.hpp"
#include "core/graph/graph.hpp"

namespace perfsim {

struct MemoryBreakdown {
  double peak = 0;                          // bytes at the high-water mark
  std::map<TensorRole, double> by_role;     // bytes per role at the peak (workspace: kernel
                                            // and library workspaces, 0 without hardware)
  std::string peak_at;                      // name of the op during which the peak occurs
  double host_bytes = 0;                    // host tensors (not in peak or by_role)
  double host_pinned_bytes = 0;             // the page-locked part of host_bytes
};

// scaled = true applies Tensor::count (the whole model); false describes exactly the
// tensors in the graph, as a backend executing it allocates them.
// This form knows no hardware, hence no workspace.
[[nodiscard]] MemoryBreakdown predict_memory(const Graph& g, bool scaled = true);
// With the workspaces of `hw` (none for a CPU profile): persistent_workspace all step; each
// op's workspace_bytes allocated before it runs and freed after it, or, for an op on a side
// stream (Op::stream > 0), held to the end of the step (as the CUDA backend keeps it until it
// joins the side streams). Workspace is per op run, not × Tensor::count, except a held one
// (every real layer's instance of the op holds its own).
[[nodiscard]] MemoryBreakdown predict_memory(const Graph& g, const Hardware& hw, bool scaled = true);

// The op index after which each tensor can be freed (-1: never freed during the step). -1 for
// persistent tensors, host tensors, and activations whose last use is an op on a side stream
// (Op::stream > 0): a side stream may still touch them after later stream-0 ops, so they are
// kept to the end of the step. Shared by the memory model and by backends so both follow one
// schedule.
[[nodiscard]] std::vector<int> last_use(const Graph& g);

}  // namespace perfsim
