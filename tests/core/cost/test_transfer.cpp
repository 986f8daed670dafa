// A calibrated profile carried to other hardware (core/cost/transfer.hpp), checked by hand.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/cost/roofline.hpp"
#include "core/cost/transfer.hpp"
#include "core/errors.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

Hardware calibrated_a() {
  Hardware a = test_models::h100_node();
  a.name = "a-local";
  a.base = "A";
  a.calibrated = true;
  a.launch_eager = 3e-6;
  a.dispatch_eager = 7e-6;
  a.engine_host_per_step = 5e-4;
  a.calibration.measured_on.device = "GPU A";
  a.calibration.kernels["residual_add/bf16/memory"] = EfficiencyCurve{{1e-9, 1e-3}, {0.5, 0.5}};
  return a;
}

Hardware datasheet_b() {
  Hardware b = test_models::h100_node();
  b.name = "B";
  b.memory_bandwidth *= 2;
  b.memory_bytes *= 2;
  b.sm_count = 100;
  b.price_per_hour = 9;
  return b;
}

}  // namespace

TEST_CASE("transfer: the target's datasheet with the source's measured efficiencies and host figures") {
  const Hardware a = calibrated_a();
  const Hardware b = datasheet_b();
  const Hardware t = transfer_profile(a, b);
  CHECK(t.name == "a-local@B");
  CHECK(t.base == "B");
  CHECK(t.calibrated);
  CHECK(t.memory_bandwidth == b.memory_bandwidth);
  CHECK(t.memory_bytes == b.memory_bytes);
  CHECK(t.sm_count == 100);
  CHECK(t.price_per_hour == 9);
  CHECK(t.launch_eager == 3e-6);
  CHECK(t.dispatch_eager == 7e-6);
  CHECK(t.engine_host_per_step == 5e-4);
  CHECK(t.calibration.kernels.size() == 1);
  CHECK(t.source.find("measured on GPU A") != std::string::npos);
}

TEST_CASE("transfer: a memory-bound kernel scales with the bandwidth at the measured efficiency") {
  const Hardware a = calibrated_a();
  const Hardware t = transfer_profile(a, datasheet_b());
  Op op;
  op.kind = OpKind::residual_add;
  op.dtype = DType::bf16;
  const double bytes = 3.0 * 2 * (1 << 20);  // three 1 Mi-element bf16 tensors
  const OpCost on_a = roofline_cost(op, 1e6, bytes, a, false);
  const OpCost on_t = roofline_cost(op, 1e6, bytes, t, false);
  CHECK(on_a.calibrated);
  CHECK(on_t.calibrated);
  // Efficiency 0.5 on both: twice the bandwidth, half the time.
  CHECK(on_a.memory_time == approx(bytes / a.memory_bandwidth / 0.5));
  CHECK(on_t.memory_time == approx(on_a.memory_time / 2));
}

TEST_CASE("transfer: only a calibrated profile carries, and only to its own kind") {
  Hardware a = calibrated_a();
  Hardware cpu = datasheet_b();
  cpu.kind = "cpu";
  CHECK_THROWS_AS((void)transfer_profile(a, cpu), ConfigError);
  a.calibrated = false;
  CHECK_THROWS_AS((void)transfer_profile(a, datasheet_b()), ConfigError);
}
