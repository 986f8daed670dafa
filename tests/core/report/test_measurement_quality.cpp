// The spread of a measured step's repeats and the warning a run prints when it is large, on
// hand-filled measurements whose figures can be checked by hand.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/report/report.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// Two ops, run once and three times per step.
StepResult measured_step(double median0, double min0, double median1, double min1, int repeats) {
  StepResult s;
  s.step = "baseline";
  Op a;
  a.id = 0;
  a.count = 1;
  Op b;
  b.id = 1;
  b.count = 3;
  s.graph.ops = {a, b};
  Measurement m;
  m.repeats = repeats;
  m.ops = {OpMeasurement{0, median0, min0, true}, OpMeasurement{1, median1, min1, true}};
  s.measured = m;
  return s;
}

}  // namespace

TEST_CASE("repeat spread: (median - fastest) / median of the op time sum, counts included") {
  // median 1 + 3·2 = 7 ms, fastest 0.9 + 3·1.5 = 5.4 ms: (7 − 5.4) / 7 = 22.9%.
  const StepResult s = measured_step(1e-3, 0.9e-3, 2e-3, 1.5e-3, 3);
  REQUIRE(repeat_spread(s).has_value());
  CHECK(*repeat_spread(s) == approx(1.6 / 7.0));
}

TEST_CASE("repeat spread: none for one repeat or no measurement") {
  CHECK_FALSE(repeat_spread(measured_step(1e-3, 1e-3, 2e-3, 2e-3, 1)).has_value());
  StepResult none;
  CHECK_FALSE(repeat_spread(none).has_value());
}

TEST_CASE("measurement warnings: only a spread above 10% warns, naming the step and the repeats") {
  RunResult quiet;
  quiet.steps.push_back(measured_step(1e-3, 0.98e-3, 2e-3, 1.95e-3, 3));
  CHECK(measurement_warnings({quiet}).empty());

  RunResult noisy = quiet;
  noisy.steps.push_back(measured_step(1e-3, 0.9e-3, 2e-3, 1.5e-3, 5));
  noisy.steps.back().step = "+fp8";
  const std::vector<std::string> w = measurement_warnings({noisy});
  REQUIRE(w.size() == 1);
  CHECK(w.front().find("up to 23%") != std::string::npos);
  CHECK(w.front().find("step +fp8, 5 repeats") != std::string::npos);
}
