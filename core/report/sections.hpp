// The content of a run report, independent of how it is rendered: header lines and titled
// tables. The text and markdown printers render the same document, so they never disagree.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/report/text_table.hpp"
#include "core/run/results.hpp"

namespace perfsim {

struct ReportSection {
  std::string title;
  TextTable table;
  std::vector<std::string> notes;   // one sentence each, printed under the table
};

struct ReportDocument {
  std::vector<std::pair<std::string, std::string>> header;  // "model" -> "llama-3-8b (8.03 B params)"
  std::vector<ReportSection> sections;
};

// `index`/`count` number the sweep point ("point 2 of 7"); count 1 means no sweep.
[[nodiscard]] ReportDocument build_report_document(const RunResult& r, std::size_t index,
                                                   std::size_t count);
// One row per sweep point × step; empty when there is a single point.
[[nodiscard]] std::optional<ReportSection> build_sweep_summary(const std::vector<RunResult>& points);

// A layout executed on several ranks: per step and rank, the measured step time, wall and
// peak memory beside the prediction for the rank's stage; nullopt when no step ran on ranks.
[[nodiscard]] std::optional<ReportSection> ranks_section(const RunResult& r);

// A serving scenario's sections (serve_sections.cpp); empty for other runs.
[[nodiscard]] std::vector<ReportSection> serve_sections(const RunResult& r);
// One row per sweep point × step of serving runs; nullopt when none has serving steps.
[[nodiscard]] std::optional<ReportSection> serve_sweep_summary(const std::vector<RunResult>& points);

// "8.03 B params", "355 M params", "102,400 params".
[[nodiscard]] std::string format_params(double params);

}  // namespace perfsim
