// How busy this machine is with other work right now: the share of all cores' time that was
// not idle over a short sample of /proc/stat, taken while perfsim itself waits. Measured times
// on a machine busy with other work are slower and vary more than the cost model expects, and
// a calibration measured then would misprice every later run. (The load average lags by
// minutes: right after a build it still counts the compiler.)
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace perfsim {

// The busy share (0..1) between two readings of /proc/stat's first ("cpu ...") line: 1 −
// Δ(idle + iowait) / Δ(all fields). nullopt when either line does not parse or no time passed.
// `own_ticks`: clock ticks this process itself ran over the same interval (its threads, a
// BLAS library's workers still spinning after their last call), taken out of the busy time:
// only other work counts.
[[nodiscard]] std::optional<double> busy_share(std::string_view stat_before, std::string_view stat_after,
                                               double own_ticks = 0);

// utime + stime of /proc/self/stat (clock ticks, the unit of /proc/stat), nullopt when it does
// not parse.
[[nodiscard]] std::optional<double> process_ticks(std::string_view self_stat);

// busy_share over `seconds` of this machine, this process's own time left out (nullopt where
// /proc/stat cannot be read).
[[nodiscard]] std::optional<double> sample_busy_share(double seconds = 0.2);

// Above this share, other work competes with the kernels for the cores.
inline constexpr double busy_machine_share = 0.25;

// "this machine is busy: other work kept 87% of its 2 cores busy just before the run; ..." for a
// share above busy_machine_share, else "".
[[nodiscard]] std::string busy_machine_warning(std::optional<double> share, unsigned cores);

}  // namespace perfsim
