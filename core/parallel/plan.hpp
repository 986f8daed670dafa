// The graphs of a parallel layout: one per distinct rank. Ranks of one pipeline stage run the
// same graph on different data (data parallel) or different shards (tensor parallel), so a
// layout of dp · tp · pp · cp GPUs has pp distinct ranks. Each graph is an ordinary graph with
// its collectives and sends/receives: the cost model prices it and a backend can run it.
#pragma once
#include <cstdint>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/passes/passes.hpp"
#include "core/config/parallel.hpp"

namespace perfsim {

struct RankGraph {
  int stage = 0;  // pipeline stage; its ranks are alike
  Graph graph;
};

// The rank graphs of step `upto` of `stack` under layout `p`: the builders make each pipeline
// stage's tensor-parallel rank (BuildOptions::parallel), the stack's passes rewrite it, and
// data parallelism (with ZeRO) adds the gradient communication of a training step.
// `layers`: transformer layers to materialize per stage (0 = all), as BuildOptions::layers.
[[nodiscard]] std::vector<RankGraph> build_rank_graphs(const ModelConfig& m, const Workload& w,
                                                       const std::vector<StackStep>& stack,
                                                       std::size_t upto, const ParallelSpec& p,
                                                       int64_t layers = 0);

}  // namespace perfsim
