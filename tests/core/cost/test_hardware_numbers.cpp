// validate_numbers: every figure of a profile is finite, and positive where the cost model
// divides by it.
#include <doctest/doctest.h>

#include <limits>

#include "core/cost/hardware.hpp"
#include "core/errors.hpp"

using namespace perfsim;

namespace {

Hardware sane() {
  Hardware hw;
  hw.name = "test";
  hw.peak_flops[static_cast<int>(DType::fp32)] = 1e12;
  hw.memory_bytes = 1e9;
  hw.memory_bandwidth = 1e11;
  return hw;
}

}  // namespace

TEST_CASE("hardware numbers: a sane profile passes, NaN, inf and negatives do not") {
  CHECK_NOTHROW(validate_numbers(sane(), "hardware 'test'"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Hardware hw = sane();
  hw.memory_bandwidth = nan;
  CHECK_THROWS_WITH_AS(validate_numbers(hw, "profile 'x.lua'"),
                       "profile 'x.lua': memory_bandwidth must be a finite number > 0 (got nan)", ConfigError);
  hw = sane();
  hw.memory_bandwidth = 0;
  CHECK_THROWS_AS(validate_numbers(hw, "p"), ConfigError);
  hw = sane();
  hw.peak_flops[static_cast<int>(DType::bf16)] = inf;
  CHECK_THROWS_WITH_AS(validate_numbers(hw, "p"), doctest::Contains("peak_flops.bf16 must be a finite number >= 0 (got inf)"),
                       ConfigError);
  hw = sane();
  hw.infiniband.latency = -1;
  CHECK_THROWS_WITH_AS(validate_numbers(hw, "p"), doctest::Contains("infiniband.latency"), ConfigError);
  hw = sane();
  hw.compute_efficiency[OpClass::gemm] = 0;
  CHECK_THROWS_WITH_AS(validate_numbers(hw, "p"), doctest::Contains("compute_efficiency.gemm must be a finite number > 0"),
                       ConfigError);
  hw = sane();
  hw.calibration.collectives[{Collective::all_reduce, 8}].bandwidth = nan;
  CHECK_THROWS_WITH_AS(validate_numbers(hw, "p"), doctest::Contains("collectives.all_reduce[8].bandwidth"), ConfigError);
  hw = sane();
  hw.sm_count = -1;
  CHECK_THROWS_AS(validate_numbers(hw, "p"), ConfigError);
}
