#include "core/run/backend.hpp"

#include <fmt/format.h>

namespace perfsim {
int step_input_id(const Graph& g, const std::string& name, std::string_view backend) {
  const int id = g.find_tensor(name);
  if (id < 0) throw NotExecutable(fmt::format("{} backend: the step has no input '{}'", backend, name));
  return id;
}

std::string graph_unsupported_reason(const Backend& b, const Graph& g) {
  for (const auto& op : g.ops) {
    if (op.attrs.sparse_24)
      return fmt::format("{} backend: 2:4 sparse GEMMs ('{}') are predicted only, with no sparse GEMM library "
                         "(cuSPARSELt) in this build",
                         b.name(), op.name);
    std::string why = b.unsupported_reason(op, g);
    if (!why.empty()) return why;
  }
  return {};
}
}  // namespace perfsim
