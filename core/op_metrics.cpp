#include "core/op_metrics.hpp"
#include <stdexcept>
namespace perfsim {
double op_flops(const Op&, const Graph&) { throw std::logic_error("not implemented yet"); }
double op_bytes(const Op&, const Graph&) { throw std::logic_error("not implemented yet"); }
double graph_flops(const Graph&) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
