#include "core/cost/hardware.hpp"

namespace perfsim {

namespace {
double lookup(const std::map<OpClass, double>& table, OpClass c, double fallback) {
  auto it = table.find(c);
  return it == table.end() ? fallback : it->second;
}
}  // namespace

// Without a table entry an op class is assumed to reach the full datasheet figure,
// so a missing entry is visible as an optimistic prediction rather than hidden.
double Hardware::compute_eff(OpClass c) const { return lookup(compute_efficiency, c, 1.0); }
double Hardware::memory_eff(OpClass c) const { return lookup(memory_efficiency, c, 1.0); }

}  // namespace perfsim
