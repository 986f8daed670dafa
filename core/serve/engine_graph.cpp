#include "core/serve/engine_graph.hpp"

namespace perfsim {

namespace {

bool serving_only_pass(const PassSpec& p) {
  if (p.name == "flash_attention" || p.name == "paged_kv" || p.name == "cuda_graphs") return true;
  const OptimizationInfo* o = find_optimization(p.name);
  return o != nullptr && o->kind != OptimizationKind::graph;
}

}  // namespace

std::vector<StackStep> engine_graph_stack(const std::vector<StackStep>& stack, std::size_t upto) {
  std::vector<StackStep> out;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i) {
    StackStep kept{stack[i].name, {}, stack[i].where};
    for (const PassSpec& p : stack[i].passes)
      if (!serving_only_pass(p)) kept.passes.push_back(p);
    out.push_back(std::move(kept));
  }
  return out;
}

Graph engine_step_graph(const ModelConfig& m, const EngineStepShape& shape, const std::vector<StackStep>& graph_stack,
                        const BuildOptions& options) {
  Graph g = build_engine_step(m, shape, options);
  for (const StackStep& s : graph_stack)
    for (const PassSpec& p : s.passes) apply_graph_pass(p, g);
  return g;
}

}  // namespace perfsim
