#include "core/runner.hpp"
#include <stdexcept>
namespace perfsim {
RunResult run_scenario(const Scenario&, Backend*, const Hardware*, const RunnerHooks&) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
