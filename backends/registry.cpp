#include "backends/registry.hpp"
#include <stdexcept>
namespace perfsim {
std::unique_ptr<Backend> make_backend(std::string_view) { throw std::logic_error("not implemented yet"); }
std::vector<std::string> compiled_backends() { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim
