// The default report: aligned plain text for a terminal. One block per sweep point, then a
// sweep summary when there are several points.
#include "core/report/report.hpp"
#include "core/report/sections.hpp"

namespace perfsim {

namespace {

std::string render_section(const ReportSection& s) {
  std::string out = s.title;
  out += '\n';
  out += s.table.to_text(2);
  for (const auto& n : s.notes) {
    out += "  · ";
    out += n;
    out += '\n';
  }
  return out;
}

}  // namespace

std::string format_table(const std::vector<RunResult>& points) {
  const std::string separator = "\n" + std::string(80, '=') + "\n\n";
  std::string out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i) out += separator;
    const ReportDocument d = build_report_document(points[i], i, points.size());
    out += format_key_values(d.header);
    for (const auto& s : d.sections) {
      out += '\n';
      out += render_section(s);
    }
  }
  if (auto summary = build_sweep_summary(points)) {
    out += separator;
    out += render_section(*summary);
  }
  return out;
}

}  // namespace perfsim
