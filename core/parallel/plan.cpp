// build_rank_graphs: one graph per pipeline stage, each a tensor-parallel rank with the stack
// applied, then data parallelism on top (see plan.hpp).
#include "core/parallel/plan.hpp"

#include "core/parallel/data_parallel.hpp"

namespace perfsim {

std::vector<RankGraph> build_rank_graphs(const ModelConfig& m, const Workload& w,
                                         const std::vector<StackStep>& stack, std::size_t upto,
                                         const ParallelSpec& p, int64_t layers) {
  std::vector<RankGraph> ranks;
  ranks.reserve(static_cast<std::size_t>(p.pp));
  for (int stage = 0; stage < p.pp; ++stage) {
    BuildOptions o;
    o.layers = layers;
    o.parallel = p;
    o.stage = stage;
    RankGraph r{stage, build_stack_graph(m, w, stack, upto, o)};
    // Inference replicas share nothing: data parallelism adds no communication to them.
    if (w.phase == Phase::train) apply_data_parallel(r.graph, p);
    ranks.push_back(std::move(r));
  }
  return ranks;
}

}  // namespace perfsim
