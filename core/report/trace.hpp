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
//
// A serving run's stack step is one process, "serve · ... (predicted, HW)": a track of the
// engine's steps (a span each, its batch and tokens in the args), counters of the batch, tokens
// per step, KV blocks used (% of the pool) and waiting requests, and the first
// serve_trace_requests served requests as async slices (request, and inside it queued, prefill,
// decode). When more requests were served, the engine steps stop where the last traced request
// finished. A step that executed adds a second process alike, "serve · ... (measured, BACKEND)",
// whose engine steps also carry their device and host time and the cost model's price.
#pragma once
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/run/results.hpp"

namespace perfsim {

[[nodiscard]] std::string format_trace(const std::vector<RunResult>& results);

inline constexpr std::size_t serve_trace_requests = 1000;

// The serving steps of `r` as trace events appended to `events`, one process per stack step (and
// one more after it for its executed run) with pids pid + 1, pid + 2, ... (serve_trace.cpp).
// Returns the last pid used (`pid` when none).
int add_serve_processes(const RunResult& r, int pid, nlohmann::ordered_json& events);

}  // namespace perfsim
