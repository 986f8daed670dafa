// Helpers of the serving engine's tests: a request built from its figures, and a clock whose
// steps each last a fixed time and are kept for inspection.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/serve/engine.hpp"

namespace perfsim::test {

inline Request request(int64_t id, double arrival, int64_t prompt, int64_t output, int prefix_group = -1,
                       int64_t prefix_tokens = 0) {
  Request r;
  r.id = id;
  r.arrival = arrival;
  r.prompt = prompt;
  r.output = output;
  r.prefix_group = prefix_group;
  r.prefix_tokens = prefix_tokens;
  return r;
}

// Every step lasts `seconds` (1 by default); the steps are kept for inspection.
class FixedClock final : public StepClock {
 public:
  explicit FixedClock(double seconds = 1.0) : m_step(seconds) {}
  [[nodiscard]] double now() const override { return m_now; }
  void wait_until(double t) override { m_now = std::max(m_now, t); }
  void run(const EngineStep& step) override {
    steps.push_back(step);
    m_now += m_step;
  }
  std::vector<EngineStep> steps;

 private:
  double m_step;
  double m_now = 0;
};

}  // namespace perfsim::test
