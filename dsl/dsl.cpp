#include "dsl/dsl.hpp"
#include <stdexcept>
namespace perfsim {
ScriptOutcome run_script(const std::string&, const DslSettings&) { throw std::logic_error("not implemented yet"); }
std::vector<Hardware> hardware_catalog(const std::string&) { throw std::logic_error("not implemented yet"); }
std::vector<ModelConfig> model_zoo(const std::string&) { throw std::logic_error("not implemented yet"); }
Hardware find_hardware(const std::string&, const std::string&) { throw std::logic_error("not implemented yet"); }
ModelConfig find_model(const std::string&, const std::string&) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
