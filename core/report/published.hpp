// The report of `perfsim validate --published`: every case's published and predicted figure
// and error, then each source's mean and worst |error|.
#pragma once
#include <string>

#include "core/report/report.hpp"
#include "core/validate/published.hpp"

namespace perfsim {

// ReportFormat::table, markdown or json (csv: one row per case).
[[nodiscard]] std::string format_published(const PublishedSummary& s, ReportFormat format);

}  // namespace perfsim
