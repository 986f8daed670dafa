// Bytes in use per tensor role and their high-water mark: what every backend's allocator
// reports as the measured peak (compared with core/cost/memory_model.hpp's prediction).
#pragma once
#include <map>

#include "core/graph/graph.hpp"

namespace perfsim {

class MemoryUsage {
 public:
  void add(TensorRole role, double bytes) {
    m_current += bytes;
    m_by_role[role] += bytes;
    if (m_current > m_peak) reset_peak();
  }
  void remove(TensorRole role, double bytes) {
    m_current -= bytes;
    m_by_role[role] -= bytes;
  }
  // Restarts peak tracking from the current state.
  void reset_peak() {
    m_peak = m_current;
    m_at_peak.clear();
    for (const auto& [r, b] : m_by_role)
      if (b > 0) m_at_peak[r] = b;
  }

  [[nodiscard]] double current() const { return m_current; }
  [[nodiscard]] double current(TensorRole r) const {
    const auto it = m_by_role.find(r);
    return it == m_by_role.end() ? 0.0 : it->second;
  }
  [[nodiscard]] double peak() const { return m_peak; }
  // Bytes per role when the peak was reached (roles with no bytes are absent).
  [[nodiscard]] const std::map<TensorRole, double>& at_peak() const { return m_at_peak; }

 private:
  std::map<TensorRole, double> m_by_role;
  std::map<TensorRole, double> m_at_peak;
  double m_current = 0;
  double m_peak = 0;
};

}  // namespace perfsim
