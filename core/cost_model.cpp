#include "core/cost_model.hpp"
#include <stdexcept>
namespace perfsim {
double Prediction::tokens_per_second(const Graph&) const { throw std::logic_error("not implemented yet"); }
OpCost predict_op(const Op&, const Graph&, const Hardware&) { throw std::logic_error("not implemented yet"); }
Prediction predict(const Graph&, const Hardware&) { throw std::logic_error("not implemented yet"); }
double timeline_makespan(const Graph&, const std::vector<OpCost>&) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
