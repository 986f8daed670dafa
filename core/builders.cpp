#include "core/builders.hpp"
#include <stdexcept>
namespace perfsim {
Graph build_graph(const ModelConfig&, const Workload&, const BuildOptions&) { throw std::logic_error("not implemented yet"); }
Graph build_prefill(const ModelConfig&, const Workload&, const BuildOptions&) { throw std::logic_error("not implemented yet"); }
Graph build_decode(const ModelConfig&, const Workload&, const BuildOptions&) { throw std::logic_error("not implemented yet"); }
Graph build_train(const ModelConfig&, const Workload&, const BuildOptions&) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
