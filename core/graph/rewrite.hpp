// Small graph-editing helpers shared by the builders and the optimization passes:
// lifetime-based tensor counts, dropping unused tensors, renumbering ops.
#pragma once
#include <vector>

#include "core/graph/graph.hpp"

namespace perfsim {

// Activations written by a transformer layer's forward op and read by a backward op are saved
// across layers, so they stand for L/built real tensors; every other activation counts 1.
// Persistent tensors keep their counts.
void assign_activation_counts(Graph& g);

// Removes tensors no op reads or writes and renumbers the rest (ops are rewired).
void remove_unused_tensors(Graph& g);

// Op ids follow their position in Graph::ops.
void renumber_ops(Graph& g);

// True when the graph holds an optimizer step (a training graph).
[[nodiscard]] bool is_training_graph(const Graph& g);

// For each tensor, the ops (indices) that read it, in execution order.
[[nodiscard]] std::vector<std::vector<int>> readers_of(const Graph& g);

}  // namespace perfsim
