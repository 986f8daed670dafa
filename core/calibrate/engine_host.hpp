// The serving engine's host work per eager step (Hardware::engine_host_per_op and
// engine_host_per_step): an engine session on the backend runs decode steps of two small rotary
// models, 4 and 16 layers deep, through the executed engine's clock
// (core/run/engine_clock.hpp); each step's host seconds are its wall time less the device's,
// and the fit is the line through their medians over the two step graphs' ops: its slope per
// op, its intercept (less host_overhead, which every step already pays) per step.
#pragma once
#include "core/calibrate/calibrate.hpp"
#include "core/calibrate/sweeps.hpp"

namespace perfsim {

// Sets hw.engine_host_per_op and engine_host_per_step; a backend without an engine session leaves it 0 and says so in
// the summary.
void sweep_engine_host(const SweepContext& ctx, Hardware& hw, SweepSummary& out);

}  // namespace perfsim
