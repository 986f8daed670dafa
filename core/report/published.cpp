#include "core/report/published.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>

#include "core/report/text_table.hpp"
#include "core/run/published_metrics.hpp"
#include "core/units.hpp"
#include "core/version.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

std::string figure(double v, const std::string& metric) {
  const PublishedMetric* m = find_published_metric(metric);
  const std::string unit = m != nullptr ? std::string(m->unit) : std::string();
  if (unit == "s") return format_duration(v);
  return fmt::format("{} {}", format_sig3(v), unit);
}

TextTable case_table(const PublishedSummary& s) {
  TextTable t;
  t.add_column("source", Align::left);
  t.add_column("case", Align::left);
  t.add_column("hardware", Align::left);
  t.add_column("metric", Align::left);
  t.add_column("published");
  t.add_column("predicted");
  t.add_column("error");
  for (const PublishedCase& c : s.cases)
    t.add_row({c.published.source, c.scenario, c.hardware, c.published.metric,
               figure(c.published.value, c.published.metric), figure(c.predicted, c.published.metric),
               format_signed_percent(c.error)});
  return t;
}

TextTable source_table(const PublishedSummary& s) {
  TextTable t;
  t.add_column("source", Align::left);
  t.add_column("cases");
  t.add_column("mean |error|");
  t.add_column("max |error|");
  t.add_column("worst case", Align::left);
  t.add_column("citation", Align::left);
  for (const PublishedSource& src : s.sources)
    t.add_row({src.source, std::to_string(src.cases), fmt::format("{:.1f}%", 100 * src.mean_abs_error),
               fmt::format("{:.1f}%", 100 * src.max_abs_error), src.worst, src.citation});
  t.add_row({"all", std::to_string(s.cases.size()), fmt::format("{:.1f}%", 100 * s.mean_abs_error),
             fmt::format("{:.1f}%", 100 * s.max_abs_error), "", ""});
  return t;
}

constexpr const char* legend =
    "· error: the prediction's error on the implied time, (predicted − published) / published for a "
    "time and published / predicted − 1 for a rate; negative: perfsim predicts faster than was measured\n";

std::string profiles_line(const PublishedSummary& s) {
  std::vector<std::string> seen;
  for (const PublishedCase& c : s.cases) {
    const std::string p = c.hardware + " (" + c.profile + ")";
    if (std::find(seen.begin(), seen.end(), p) == seen.end()) seen.push_back(p);
  }
  std::string out;
  for (const std::string& p : seen) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string as_json(const PublishedSummary& s) {
  json j;
  j["perfsim"] = perfsim_version;
  j["suite"] = "published";
  // The day the prediction was made: the cost model changes, the published figures do not.
  const std::time_t now = std::time(nullptr);
  char day[16] = {};
  std::strftime(day, sizeof day, "%Y-%m-%d", std::gmtime(&now));
  j["date"] = day;
  json cases = json::array();
  for (const PublishedCase& c : s.cases) {
    json o;
    o["source"] = c.published.source;
    o["citation"] = c.published.citation;
    o["url"] = c.published.url;
    o["scenario"] = c.scenario;
    o["file"] = c.file;
    o["step"] = c.step;
    o["hardware"] = c.hardware;
    o["profile"] = c.profile;
    o["metric"] = c.published.metric;
    o["published"] = c.published.value;
    o["predicted"] = c.predicted;
    o["error"] = c.error;
    if (!c.published.note.empty()) o["note"] = c.published.note;
    cases.push_back(std::move(o));
  }
  j["cases"] = std::move(cases);
  json sources = json::array();
  for (const PublishedSource& src : s.sources)
    sources.push_back({{"source", src.source},
                       {"citation", src.citation},
                       {"url", src.url},
                       {"cases", src.cases},
                       {"mean_abs_error", src.mean_abs_error},
                       {"max_abs_error", src.max_abs_error},
                       {"worst", src.worst}});
  j["sources"] = std::move(sources);
  j["mean_abs_error"] = s.mean_abs_error;
  j["max_abs_error"] = s.max_abs_error;
  return j.dump(2) + "\n";
}

std::string as_csv(const PublishedSummary& s) {
  std::string out = "source,scenario,hardware,metric,published,predicted,error\n";
  for (const PublishedCase& c : s.cases)
    out += fmt::format("{},{},{},{},{},{},{}\n", c.published.source, c.scenario, c.hardware, c.published.metric,
                       c.published.value, c.predicted, c.error);
  return out;
}

}  // namespace

std::string format_published(const PublishedSummary& s, ReportFormat format) {
  switch (format) {
    case ReportFormat::json:
      return as_json(s);
    case ReportFormat::csv:
      return as_csv(s);
    case ReportFormat::markdown:
      return fmt::format("## Published results\n\nprofiles: {}\n\n{}\n{}\n### By source\n\n{}", profiles_line(s),
                         case_table(s).to_markdown(), legend, source_table(s).to_markdown());
    case ReportFormat::table:
      break;
  }
  return fmt::format("Published results, predicted\nprofiles  {}\n\n{}{}\nBy source\n{}", profiles_line(s),
                     case_table(s).to_text(2), legend, source_table(s).to_text(2));
}

}  // namespace perfsim
