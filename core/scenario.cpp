#include "core/scenario.hpp"
#include <stdexcept>
namespace perfsim {
void validate(const Scenario&) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
