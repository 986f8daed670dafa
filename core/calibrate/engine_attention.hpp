// The serving engine's decode attention as the engine runs it: decode steps of the plan's
// models (CalibrationPlan::engine_attention) on an engine session, each op timed on its own
// (EngineSession::run_step_ops), their varlen attention kernels fed to the "varlen_decode"
// curves ("..._fp8kv" over an fp8 cache). The split-KV kernel of the paged cases is another
// kernel: over an fp8 cache it runs up to twice as slow per byte as the engine's.
#pragma once
#include "core/calibrate/calibrate.hpp"
#include "core/calibrate/fit.hpp"
#include "core/calibrate/sweeps.hpp"

namespace perfsim {

// A backend without an engine session, or a plan without cases, adds nothing and says so.
void sweep_engine_attention(const SweepContext& ctx, double launch_graph, CurveFitter& fit, SweepSummary& out);

}  // namespace perfsim
