// How many times an executed step runs: the counts a scenario's execute{} table and a backend's
// RunOptions start from, and the most a scenario may ask for.
#pragma once

namespace perfsim {

inline constexpr int default_warmup_runs = 1;  // untimed runs before measuring
inline constexpr int default_timed_runs = 5;   // timed runs; per-op figures are their medians

// Timed and untimed runs of one step: more gives no better median, only a run without end.
inline constexpr int max_execute_runs = 10000;

}  // namespace perfsim
