#include "core/passes.hpp"
#include <stdexcept>
namespace perfsim {
const std::vector<OptimizationInfo>& optimizations() { throw std::logic_error("not implemented yet"); }
void validate(const PassSpec&) { throw std::logic_error("not implemented yet"); }
bool apply_workload_pass(const PassSpec&, Workload&) { throw std::logic_error("not implemented yet"); }
void apply_graph_pass(const PassSpec&, Graph&) { throw std::logic_error("not implemented yet"); }
Graph build_stack_graph(const ModelConfig&, const Workload&, const std::vector<StackStep>&, std::size_t, const BuildOptions&) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
