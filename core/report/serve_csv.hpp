// The CSV report's rows for a serving run: one per stack step, each followed by its executed
// run's when it executed, then by the same step's rows on the other hardware. csv.cpp puts the
// sweep keys in front.
#pragma once
#include <string>
#include <vector>

#include "core/run/results.hpp"

namespace perfsim {

// step, hardware, scheduler, requests, ..., prefix_hit_rate, source (docs/CLI.md, "--format csv").
[[nodiscard]] const std::vector<std::string>& serve_csv_columns();

// Cells in serve_csv_columns() order, `source` "predicted" or "measured" (the executed run's
// figures, on the same hardware); a what-if hardware the step could not be predicted on has its
// step, hardware, scheduler and source only.
[[nodiscard]] std::vector<std::vector<std::string>> serve_csv_rows(const RunResult& r);

}  // namespace perfsim
