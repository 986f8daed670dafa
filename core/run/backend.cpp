#include "core/run/backend.hpp"
namespace perfsim {
std::string graph_unsupported_reason(const Backend& b, const Graph& g) {
  for (const auto& op : g.ops) {
    std::string why = b.unsupported_reason(op, g);
    if (!why.empty()) return why;
  }
  return {};
}
}  // namespace perfsim
