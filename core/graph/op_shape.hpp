// A short, human-readable shape for an op, shown by `perfsim explain` and in JSON reports.
#pragma once
#include <string>

#include "core/graph/graph.hpp"

namespace perfsim {

// m×n×k for GEMMs (b×(m×n×k) when batched), the attention geometry ("b4 h16/16 q1024 kv1024
// d64", plus " pages of N" for a paged cache), a paged KV append's rows and position, else
// the first output's shape ("4096×1024").
[[nodiscard]] std::string op_shape_text(const Op& op, const Graph& g);

}  // namespace perfsim
