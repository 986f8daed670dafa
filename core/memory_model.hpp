// Predicted memory: a walk over the graph in execution order. Persistent tensors are live
// throughout; an activation is live from the op that writes it to the last op that reads it
// (outputs nobody reads are freed right after their op).
#pragma once
#include <map>
#include <string>

#include "core/graph.hpp"

namespace perfsim {

struct MemoryBreakdown {
  double peak = 0;                          // bytes at the high-water mark
  std::map<TensorRole, double> by_role;     // bytes per role at the peak
  std::string peak_at;                      // name of the op during which the peak occurs
};

// scaled = true applies Tensor::count (the whole model); false describes exactly the
// tensors in the graph, as a backend executing it allocates them.
[[nodiscard]] MemoryBreakdown predict_memory(const Graph& g, bool scaled = true);

// The op index after which each tensor can be freed (-1: persistent / never freed).
// Shared by the memory model and by backends so both follow one schedule.
[[nodiscard]] std::vector<int> last_use(const Graph& g);

}  // namespace perfsim
