// The report as markdown (for pull requests and notes): the same document as the text table,
// with a bullet list for the header and a markdown table per section.
#include <fmt/format.h>

#include "core/report/report.hpp"
#include "core/report/sections.hpp"

namespace perfsim {

namespace {

std::string render_section(const ReportSection& s) {
  std::string out = fmt::format("### {}\n\n{}", s.title, s.table.to_markdown());
  if (!s.notes.empty()) {
    out += "\n";
    for (const auto& n : s.notes) out += fmt::format("- {}\n", n);
  }
  return out;
}

}  // namespace

std::string format_markdown(const std::vector<RunResult>& points) {
  std::string out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const RunResult& r = points[i];
    if (i) out += "\n";
    out += fmt::format("## {}{}\n\n", r.scenario,
                       r.sweep_point.empty() ? "" : fmt::format(" ({})", sweep_label(r.sweep_point)));
    const ReportDocument d = build_report_document(r, i, points.size());
    for (const auto& [k, v] : d.header) out += fmt::format("- **{}**: {}\n", k, v);
    for (const auto& s : d.sections) {
      out += '\n';
      out += render_section(s);
    }
  }
  if (auto summary = build_sweep_summary(points)) {
    out += '\n';
    out += render_section(*summary);
  }
  return out;
}

}  // namespace perfsim
