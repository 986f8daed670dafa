// A run as a trace: Chrome trace-event JSON that Perfetto (ui.perfetto.dev, offline too) and
// chrome://tracing open. Each stack step is two processes side by side, its predicted timeline
// and its measured one, with a track per stream the ops run on (main, copy, gather, gradient,
// pipeline, context) and one for the host's issue of them; every op is a span carrying its
// shape, dtype, FLOPs, bytes, bound, predicted and measured time and error. A step's first
// track holds one span of its reported step time (and the host overhead inside it).
//
// The measured timeline is the one perfsim's measured step time is: the stream timeline of the
// measured per-op medians (core/cost/timeline.cpp), not a profiler's clock. A parallel layout's
// step shows rank 0's graph.
#pragma once
#include <string>
#include <vector>

#include "core/run/results.hpp"

namespace perfsim {

[[nodiscard]] std::string format_trace(const std::vector<RunResult>& results);

}  // namespace perfsim
