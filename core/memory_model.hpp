// Predicted memory: a walk over the graph in execution order. Persistent tensors are live
// throughout; an activation is live from the op that writes it to the last op that reads it
// (outputs nobody reads are freed right after their op). Host tensors are not device memory:
// they are reported apart (host_bytes) and never counted in the peak.
#pragma once
#include <map>
#include <string>

#include "core/graph.hpp"

namespace perfsim {

struct MemoryBreakdown {
  double peak = 0;                          // bytes at the high-water mark
  std::map<TensorRole, double> by_role;     // bytes per role at the peak
  std::string peak_at;                      // name of the op during which the peak occurs
  double host_bytes = 0;                    // host tensors (not in peak or by_role)
  double host_pinned_bytes = 0;             // the page-locked part of host_bytes
};

// scaled = true applies Tensor::count (the whole model); false describes exactly the
// tensors in the graph, as a backend executing it allocates them.
[[nodiscard]] MemoryBreakdown predict_memory(const Graph& g, bool scaled = true);

// The op index after which each tensor can be freed (-1: never freed during the step). -1 for
// persistent tensors, host tensors, and activations whose last use is an op on a side stream
// (Op::stream > 0): a side stream may still touch them after later stream-0 ops, so they are
// kept to the end of the step. Shared by the memory model and by backends so both follow one
// schedule.
[[nodiscard]] std::vector<int> last_use(const Graph& g);

}  // namespace perfsim
