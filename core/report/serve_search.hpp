// `perfsim search` on a serve{} scenario: the services search_serving_layouts ranked
// (core/serve/layout_search.hpp), printed as a table of the best, or every candidate (the
// pruned ones with their reason) as JSON or CSV. Pure functions that return strings.
#pragma once
#include <string>

namespace perfsim {

struct ServeSearchResult;

struct ServeSearchReportInput {
  std::string scenario, file;
  std::string note;       // a line for the header ("" when none)
  std::string step;       // the stack step searched, in words
  std::string traffic;    // the requests, in words
  std::string scheduler;  // the stack's scheduler as the step sets it, in words
  const ServeSearchResult* result = nullptr;
  int top = 10;           // candidates the table shows
};

[[nodiscard]] std::string format_serve_search_table(const ServeSearchReportInput& in);
[[nodiscard]] std::string format_serve_search_json(const ServeSearchReportInput& in);
[[nodiscard]] std::string format_serve_search_csv(const ServeSearchReportInput& in);
// Why nothing could be ranked (no candidate priced), naming what to change; "" otherwise.
[[nodiscard]] std::string serve_search_failure(const ServeSearchResult& r);

}  // namespace perfsim
