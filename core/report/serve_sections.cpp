// The report's sections for a serving scenario: latency and throughput per stack step, the
// engine's behaviour (batches, KV pool, prefix cache, preemptions), and the other hardware.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/report/sections.hpp"
#include "core/spec/size_text.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

std::string ms(double seconds) {
  if (!std::isfinite(seconds)) return "—";
  return format_sig3(seconds * 1e3);
}

std::string pct(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

std::string count(int64_t n) { return grouped(n); }

}  // namespace

std::vector<ReportSection> serve_sections(const RunResult& r) {
  std::vector<ReportSection> out;
  if (r.serve.empty()) return out;
  const ServeMetrics& base = r.serve.front().predicted.metrics;

  ReportSection lat;
  lat.title = fmt::format("Serving latency and throughput (predicted on {}; ms)", r.serve.front().hardware);
  TextTable& t = lat.table;
  t.add_column("step", Align::left);
  for (const char* c : {"req/s", "out tok/s", "vs first", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
                        "ITL p50", "E2E p50", "E2E p99", "goodput", "SLO met", "preempt", "rejected"})
    t.add_column(c);
  for (const ServeStepResult& s : r.serve) {
    const ServeMetrics& m = s.predicted.metrics;
    t.add_row({s.step, format_sig3(m.request_throughput), format_rate(m.output_throughput),
               base.output_throughput > 0 ? format_speedup(m.output_throughput / base.output_throughput) : "—",
               ms(m.ttft.median), ms(m.ttft.p99), ms(m.tpot.median), ms(m.tpot.p99), ms(m.itl.median),
               ms(m.e2e.median), ms(m.e2e.p99), format_sig3(m.goodput), pct(m.slo_attainment), count(m.preemptions),
               count(m.rejected)});
  }
  lat.notes.push_back(
      "vLLM's benchmark definitions: TTFT arrival to first token; TPOT (E2E − TTFT) / (output − 1) per request; "
      "ITL every gap between tokens; percentiles interpolated; throughputs over the run (time 0 to the last token)");
  lat.notes.push_back("goodput: requests/s meeting every SLO; vs first: output tokens/s against the first step");
  for (const ServeStepResult& s : r.serve)
    if (!s.not_executed.empty()) {
      lat.notes.push_back("not executed: " + s.not_executed);
      break;
    }
  out.push_back(std::move(lat));

  ReportSection eng;
  eng.title = "Engine (predicted)";
  TextTable& e = eng.table;
  e.add_column("step", Align::left);
  for (const char* c : {"steps", "batch", "tok/step", "step ms", "queue p50", "queue p99", "KV pool", "KV use",
                        "KV max", "prefix hit"})
    e.add_column(c);
  e.add_column("scheduler", Align::left);
  for (const ServeStepResult& s : r.serve) {
    const ServeMetrics& m = s.predicted.metrics;
    const KvPool& p = s.predicted.pool;
    e.add_row({s.step, count(m.steps), format_sig3(m.mean_batch), format_sig3(m.mean_step_tokens),
               ms(m.mean_step_time), ms(m.queue.median), ms(m.queue.p99),
               fmt::format("{} × {}", count(p.blocks), p.block), pct(m.kv_utilization_mean),
               pct(m.kv_utilization_max), pct(m.prefix_hit_rate), s.scheduler});
  }
  eng.notes.push_back("KV pool: blocks × tokens per block (one max_seq reservation per block without paged_kv); KV use: "
                      "held blocks over the pool, weighted by step time");
  out.push_back(std::move(eng));

  bool any_what_if = false;
  for (const ServeStepResult& s : r.serve) any_what_if = any_what_if || !s.what_if.empty();
  if (any_what_if) {
    ReportSection w;
    w.title = "Serving on other hardware (predicted; ms)";
    TextTable& h = w.table;
    h.add_column("step", Align::left);
    h.add_column("hardware", Align::left);
    for (const char* c : {"req/s", "out tok/s", "TTFT p50", "TPOT p50", "E2E p99", "goodput"}) h.add_column(c);
    for (const ServeStepResult& s : r.serve)
      for (const ServeStepResult::WhatIf& x : s.what_if) {
        if (!x.error.empty()) {
          h.add_row({s.step, x.hardware, x.error});
          continue;
        }
        const ServeMetrics& m = x.metrics;
        h.add_row({s.step, x.hardware, format_sig3(m.request_throughput), format_rate(m.output_throughput),
                   ms(m.ttft.median), ms(m.tpot.median), ms(m.e2e.p99), format_sig3(m.goodput)});
      }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace perfsim

namespace perfsim {

std::optional<ReportSection> serve_sweep_summary(const std::vector<RunResult>& points) {
  std::vector<std::string> keys;
  for (const auto& r : points)
    for (const auto& [k, v] : r.sweep_point)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  ReportSection s;
  s.title = "Sweep summary (serving, predicted; ms)";
  TextTable& t = s.table;
  for (const auto& k : keys) t.add_column(k);
  t.add_column("step", Align::left);
  for (const char* c : {"req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99",
                        "goodput", "SLO met", "rejected"})
    t.add_column(c);
  for (const auto& r : points)
    for (const ServeStepResult& st : r.serve) {
      std::vector<std::string> row;
      for (const auto& k : keys) {
        auto it = r.sweep_point.find(k);
        row.push_back(it == r.sweep_point.end() ? "" : it->second);
      }
      const ServeMetrics& m = st.predicted.metrics;
      for (std::string c : {st.step, format_sig3(m.request_throughput), format_rate(m.output_throughput), ms(m.ttft.median),
                            ms(m.ttft.p99), ms(m.tpot.median), ms(m.tpot.p99), ms(m.e2e.median), ms(m.e2e.p99),
                            format_sig3(m.goodput), pct(m.slo_attainment), count(m.rejected)})
        row.push_back(std::move(c));
      t.add_row(std::move(row));
    }
  if (t.empty()) return std::nullopt;
  return s;
}

}  // namespace perfsim
