// Serving runs' CSV rows: the ServeMetrics of each stack step (predicted, each replica's behind a
// router, and measured when it executed) and what-if hardware.
#include "core/report/serve_csv.hpp"

#include <fmt/format.h>

#include <cmath>

namespace perfsim {

namespace {

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.15g}", v) : std::string{}; }

std::vector<std::string> metric_cells(const ServeMetrics& m) {
  std::vector<std::string> c = {std::to_string(m.requests),
                                std::to_string(m.completed),
                                std::to_string(m.rejected),
                                std::to_string(m.preemptions),
                                num(m.duration),
                                num(m.request_throughput),
                                num(m.output_throughput),
                                num(m.total_token_throughput)};
  for (const LatencyStats* s : {&m.ttft, &m.tpot, &m.itl, &m.e2e})
    c.insert(c.end(), {num(s->mean), num(s->median), num(s->p90), num(s->p99)});
  c.insert(c.end(), {num(m.goodput), num(m.slo_attainment), num(m.mean_batch), num(m.kv_utilization_mean),
                     num(m.prefix_hit_rate)});
  return c;
}

}  // namespace

const std::vector<std::string>& serve_csv_columns() {
  static const std::vector<std::string> columns = [] {
    std::vector<std::string> c = {"step",
                                  "hardware",
                                  "scheduler",
                                  "requests",
                                  "completed",
                                  "rejected",
                                  "preemptions",
                                  "duration_s",
                                  "request_throughput",
                                  "output_throughput",
                                  "total_token_throughput"};
    for (const char* latency : {"ttft", "tpot", "itl", "e2e"})
      for (const char* stat : {"mean", "median", "p90", "p99"}) c.push_back(fmt::format("{}_{}_s", latency, stat));
    c.insert(c.end(), {"goodput", "slo_attainment", "mean_batch", "kv_utilization_mean", "prefix_hit_rate"});
    // Last, so the columns before it keep their places.
    c.emplace_back("source");
    return c;
  }();
  return columns;
}

std::vector<std::vector<std::string>> serve_csv_rows(const RunResult& r) {
  std::vector<std::vector<std::string>> rows;
  const std::size_t width = serve_csv_columns().size();
  for (const ServeStepResult& s : r.serve) {
    auto row_of = [&](const std::string& hardware, const ServeMetrics* m, const std::string& source) {
      std::vector<std::string> row = {s.step, hardware, s.scheduler};
      if (m != nullptr) {
        const auto cells = metric_cells(*m);
        row.insert(row.end(), cells.begin(), cells.end());
      }
      row.resize(width);
      row.back() = source;
      return row;
    };
    if (!s.does_not_fit.empty()) {
      rows.push_back(row_of(s.hardware, nullptr, "does not fit"));
      continue;
    }
    rows.push_back(row_of(s.hardware, &s.predicted.metrics, "predicted"));
    // Behind a router: a row per replica after the service's.
    for (std::size_t i = 0; i < s.predicted.replicas.size(); ++i)
      rows.push_back(row_of(s.hardware, &s.predicted.replicas[i].metrics, fmt::format("predicted replica {}", i)));
    if (s.executed) {
      rows.push_back(row_of(s.hardware, &s.executed->metrics, "measured"));
      for (std::size_t i = 0; i < s.executed->replicas.size(); ++i)
        rows.push_back(row_of(s.hardware, &s.executed->replicas[i].metrics, fmt::format("measured replica {}", i)));
    }
    for (const ServeStepResult::WhatIf& w : s.what_if)
      rows.push_back(row_of(w.hardware, w.error.empty() ? &w.metrics : nullptr, "predicted"));
  }
  return rows;
}

}  // namespace perfsim
