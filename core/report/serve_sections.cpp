// The report's sections for a serving scenario: latency and throughput per stack step (the
// executed run's beside the prediction), the engine's behaviour (batches, KV pool, prefix cache,
// preemptions), the executed engine steps against the cost model's price of the same batches,
// and the other hardware.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/report/sections.hpp"
#include "core/report/serve_json.hpp"
#include "core/serve/simulate.hpp"
#include "core/config/size_text.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

constexpr double long_latency_seconds = 10;

// A latency in the tables' unit, ms; from 10 s on, in seconds and marked so: an overloaded
// engine's hours of queueing read as "300,000 s", not as nine digits of milliseconds.
std::string ms(double seconds) {
  if (!std::isfinite(seconds)) return "—";
  if (std::fabs(seconds) >= long_latency_seconds) return format_sig3(seconds) + " s";
  return format_sig3(seconds * 1e3);
}

std::string pct(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

std::string count(int64_t n) { return grouped(n); }

std::string error(double predicted, double measured) {
  return format_signed_percent(relative_error(predicted, measured));
}

// The latency table's figures of one run, in its column order after "vs first".
std::vector<std::string> latency_cells(const ServeMetrics& m) {
  return {ms(m.ttft.median),     ms(m.ttft.p99),       ms(m.tpot.median), ms(m.tpot.p99),
          ms(m.itl.median),      ms(m.e2e.median),     ms(m.e2e.p99),     format_sig3(m.goodput),
          pct(m.slo_attainment), count(m.preemptions), count(m.rejected)};
}

// The errors of the same figures; the SLO share and the counts have none.
std::vector<std::string> latency_errors(const ServeMetrics& p, const ServeMetrics& m) {
  return {error(p.ttft.median, m.ttft.median),
          error(p.ttft.p99, m.ttft.p99),
          error(p.tpot.median, m.tpot.median),
          error(p.tpot.p99, m.tpot.p99),
          error(p.itl.median, m.itl.median),
          error(p.e2e.median, m.e2e.median),
          error(p.e2e.p99, m.e2e.p99),
          error(p.goodput, m.goodput),
          "",
          "",
          ""};
}

int executed_steps(const RunResult& r) {
  int n = 0;
  for (const ServeStepResult& s : r.serve) n += s.executed ? 1 : 0;
  return n;
}

const ServeStepResult* first_executed(const RunResult& r) {
  for (const ServeStepResult& s : r.serve)
    if (s.executed) return &s;
  return nullptr;
}

// The executed engine steps, by kind, against the cost model's price of the same batches; with
// more than one executed step, each one's output throughput against the first executed one's.
ReportSection engine_steps_section(const RunResult& r, const ServeStepResult& base) {
  const bool speedups = executed_steps(r) > 1;

  ReportSection sec;
  sec.title = fmt::format("Engine steps, predicted vs measured (on {}; wall time, ms)", r.backend);
  TextTable& t = sec.table;
  t.add_column("step", Align::left);
  t.add_column("kind", Align::left);
  for (const char* c : {"steps", "wall p50", "wall p90", "pred p50", "err p50", "|err| p50", "dev err p50", "host",
                        "host p50", "device"})
    t.add_column(c);
  if (speedups) t.add_column("pred speedup"), t.add_column("meas speedup");
  for (const ServeStepResult& s : r.serve) {
    if (!s.executed) continue;
    const ExecutedStepSummary summary = summarize_executed_steps(*s.executed);
    const std::pair<const char*, const ExecutedStepFigures*> kinds[] = {
        {"all", &summary.all}, {"decode only", &summary.decode}, {"with prefill", &summary.prefill}};
    for (const auto& [kind, f] : kinds) {
      // A kind the run had no step of says nothing; "all" always shows.
      if (f->steps == 0 && f != &summary.all) continue;
      std::vector<std::string> row{s.step,
                                   kind,
                                   count(f->steps),
                                   ms(f->wall_median),
                                   ms(f->wall_p90),
                                   ms(f->predicted_median),
                                   format_signed_percent(f->error_median),
                                   f->steps > 0 ? pct(f->abs_error_median) : "—",
                                   f->steps > 0 ? format_signed_percent(f->device_error_median) : "—",
                                   f->steps > 0 ? pct(f->host_share) : "—",
                                   f->steps > 0 ? ms(f->host_median) : "—",
                                   f->steps > 0 ? pct(f->device_share) : "—"};
      if (speedups && f == &summary.all) {
        const ServeMetrics& from = base.predicted.metrics;
        const ServeMetrics& measured_from = base.executed->metrics;
        row.push_back(format_speedup(s.predicted.metrics.output_throughput / from.output_throughput));
        row.push_back(format_speedup(s.executed->metrics.output_throughput / measured_from.output_throughput));
      }
      t.add_row(std::move(row));
    }
  }
  sec.notes.push_back(
      "pred: the cost model's price of the same batch; err: (pred − wall) / wall per engine step, p50 the median "
      "over the steps; dev err: (pred − its host part − device) / device, the kernels alone, without host work");
  sec.notes.push_back(
      "host: the engine's host work (building the step, writing its inputs; host p50 in ms per step, what the profile's engine_host_per_step and engine_host_per_op price), device: the device's time, each over "
      "the step's wall time, mean over the steps");
  if (speedups)
    sec.notes.push_back(fmt::format("speedup: output tokens/s against {}, the first executed step", base.step));
  for (const ServeStepResult& s : r.serve)
    if (s.executed)
      sec.notes.push_back(fmt::format("{}: {} engine steps in {} (setup included), {} of weights and KV pages held",
                                      s.step, count(static_cast<int64_t>(s.executed->steps.size())),
                                      format_duration(s.executed->seconds), format_bytes(s.executed->held_bytes)));
  return sec;
}

// Speculative decoding's figures per step that speculates: the drafts, their acceptance and
// the tokens a verify pass yields, beside Leviathan et al.'s expectation.
std::optional<ReportSection> speculative_section(const RunResult& r) {
  ReportSection sec;
  sec.title = "Speculative decoding (predicted; measured where executed)";
  TextTable& t = sec.table;
  t.add_column("step", Align::left);
  t.add_column("run", Align::left);
  for (const char* c : {"drafts/step", "acceptance", "verifies", "accepted rate", "tokens/verify", "expected"})
    t.add_column(c);
  for (const ServeStepResult& s : r.serve) {
    const SchedulerConfig& c = s.predicted.config;
    if (c.speculative <= 0 || !s.does_not_fit.empty()) continue;
    const double expected = speculative_tokens_per_step(c.acceptance, c.speculative);
    auto row = [&](const char* run, const ServeMetrics& m) {
      t.add_row({s.step, run, std::to_string(c.speculative), format_sig3(c.acceptance), count(m.verifies),
                 pct(m.acceptance_rate()), format_sig3(m.tokens_per_verify()), format_sig3(expected)});
    };
    row("predicted", s.predicted.metrics);
    if (s.executed) row("measured", s.executed->metrics);
  }
  if (t.empty()) return std::nullopt;
  sec.notes.push_back("drafts/step: k, the n-gram drafts each decode proposes; acceptance: the chance each is "
                      "accepted, as set; accepted rate: the drafts the run accepted; tokens/verify: the tokens a "
                      "verify pass yielded (its accepted drafts and the next token); expected: (1 − α^(k+1)) / "
                      "(1 − α), Leviathan et al. 2023 (drafts near a request's end are fewer, so the run's is lower)");
  return sec;
}

// Each replica's share of a service behind a router (steps with dp > 1).
std::optional<ReportSection> replicas_section(const RunResult& r) {
  ReportSection sec;
  bool measured = false;
  for (const ServeStepResult& s : r.serve) measured = measured || (s.executed && !s.executed->replicas.empty());
  sec.title = measured ? "Replicas (predicted, and measured on ranks; ms)" : "Replicas (predicted; ms)";
  TextTable& t = sec.table;
  t.add_column("step", Align::left);
  t.add_column("replica");
  if (measured) t.add_column("run", Align::left);
  for (const char* c : {"requests", "steps", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "E2E p99", "KV use",
                        "prefix hit"})
    t.add_column(c);
  auto row = [&](const ServeStepResult& s, const std::string& replica, const char* run, const ServeMetrics& m) {
    std::vector<std::string> cells{s.step, replica};
    if (measured) cells.emplace_back(run);
    for (std::string c : {count(m.requests), count(m.steps), format_rate(m.output_throughput), ms(m.ttft.median),
                          ms(m.ttft.p99), ms(m.tpot.median), ms(m.e2e.p99), pct(m.kv_utilization_mean),
                          pct(m.prefix_hit_rate)})
      cells.push_back(std::move(c));
    t.add_row(std::move(cells));
  };
  for (const ServeStepResult& s : r.serve)
    for (std::size_t i = 0; i < s.predicted.replicas.size(); ++i) {
      const std::string& role = s.predicted.replicas[i].role;
      const std::string replica = role.empty() ? std::to_string(i) : fmt::format("{} ({})", i, role);
      row(s, replica, "predicted", s.predicted.replicas[i].metrics);
      if (s.executed && i < s.executed->replicas.size())
        row(s, replica, "measured", s.executed->replicas[i].metrics);
    }
  if (t.empty()) return std::nullopt;
  sec.notes.push_back("each replica an engine on its own GPUs with the step's scheduler and KV pool; the router (engine "
                      "line) sends it these requests; out tok/s over the whole run");
  bool disaggregated = false;
  for (const ServeStepResult& s : r.serve) disaggregated = disaggregated || s.predicted.transfers.has_value();
  if (disaggregated)
    sec.notes.push_back("disaggregated: a prefill engine's requests end at their first token; a decode engine's "
                        "latencies run from the arrival of a request's KV");
  return sec;
}

// Steps over several GPUs: the layout and the figures per GPU, where steps of different GPU
// counts compare.
std::optional<ReportSection> layouts_section(const RunResult& r) {
  ReportSection sec;
  sec.title = "GPUs (predicted)";
  TextTable& t = sec.table;
  t.add_column("step", Align::left);
  t.add_column("layout", Align::left);
  for (const char* c : {"GPUs", "out tok/s/GPU", "goodput/GPU"}) t.add_column(c);
  bool several = false;
  for (const ServeStepResult& s : r.serve) {
    if (!s.does_not_fit.empty()) continue;
    const ServePrediction& p = s.predicted;
    const auto [layout, gpus] = describe_service(p);
    several = several || gpus > 1;
    t.add_row({s.step, layout, std::to_string(gpus), format_rate(p.metrics.output_throughput / gpus),
               format_sig3(p.metrics.goodput / gpus)});
  }
  if (!several) return std::nullopt;
  sec.notes.push_back("out tok/s/GPU: the service's output tokens/s over every GPU it uses; goodput/GPU: requests/s "
                      "meeting every SLO, over the same");
  return sec;
}

// Disaggregated steps: the KV each request sent from its prefill engine to its decode engine.
std::optional<ReportSection> transfers_section(const RunResult& r) {
  ReportSection sec;
  bool measured = false;
  for (const ServeStepResult& s : r.serve) measured = measured || (s.executed && !s.executed->kv_transfers.empty());
  sec.title = measured ? "KV transfers, prefill to decode (predicted, and measured on ranks; ms)"
                       : "KV transfers, prefill to decode (predicted; ms)";
  TextTable& t = sec.table;
  t.add_column("step", Align::left);
  for (const char* c : {"requests", "link", "KV/token/GPU", "mean MiB", "transfer p50", "transfer p99", "waited p50",
                        "waited p99"})
    t.add_column(c);
  if (measured)
    for (const char* c : {"meas p50", "meas p99"}) t.add_column(c);
  for (const ServeStepResult& s : r.serve) {
    if (!s.predicted.transfers) continue;
    const KvTransfers& k = *s.predicted.transfers;
    std::vector<double> sent, waited;
    double bytes = 0;
    for (std::size_t i = 0; i < k.seconds.size(); ++i) {
      if (k.seconds[i] < 0) continue;
      sent.push_back(k.seconds[i]);
      waited.push_back(k.exposed[i]);
      bytes += static_cast<double>(s.predicted.run.requests[i].request.prompt) * k.bytes_per_token;
    }
    if (sent.empty()) continue;
    const LatencyStats a = latency_stats(sent), b = latency_stats(waited);
    std::vector<std::string> row{s.step, count(static_cast<int64_t>(sent.size())), k.link,
                                 format_bytes(k.bytes_per_token),
                                 format_sig3(bytes / static_cast<double>(sent.size()) / (1 << 20)),
                                 ms(a.median), ms(a.p99), ms(b.median), ms(b.p99)};
    if (measured) {
      std::vector<double> got;
      if (s.executed)
        for (double v : s.executed->kv_transfers)
          if (v >= 0) got.push_back(v);
      const LatencyStats g = latency_stats(got);
      row.push_back(got.empty() ? "—" : ms(g.median));
      row.push_back(got.empty() ? "—" : ms(g.p99));
    }
    t.add_row(std::move(row));
  }
  if (t.empty()) return std::nullopt;
  sec.notes.push_back("transfer: a prompt's KV from a prefill GPU to a decode GPU (every GPU of the engine sends its "
                      "share at once); waited: of it, what came after the prompt's last prefill step (all of it "
                      "unless kv_transfer = \"layerwise\"); TTFT holds the prefill, the wait and the decode queue");
  if (measured)
    sec.notes.push_back("meas: the prompt's KV pages (every layer's K and V of its blocks) gathered, sent from the "
                        "prefill rank to the decode rank and written into its pool, timed to the decode rank's "
                        "answer");
  return sec;
}

}  // namespace

std::vector<ReportSection> serve_sections(const RunResult& r) {
  std::vector<ReportSection> out;
  if (r.serve.empty()) return out;
  // Speedups against the first step that fits its GPU.
  const ServeStepResult* first_fit = &r.serve.front();
  for (const ServeStepResult& st : r.serve)
    if (st.does_not_fit.empty()) {
      first_fit = &st;
      break;
    }
  const ServeMetrics& base = first_fit->predicted.metrics;

  // An executed run adds a measured and an error row under each step's predicted one.
  const ServeStepResult* measured_base = first_executed(r);
  const bool executed = measured_base != nullptr;
  // The measured rows' "vs first" has the predicted rows' base only when the first step executed.
  const bool same_base = executed && measured_base == &r.serve.front();

  ReportSection lat;
  lat.title = executed ? fmt::format("Serving latency and throughput (predicted on {}, measured on {}; ms)",
                                     r.serve.front().hardware, r.backend)
                       : fmt::format("Serving latency and throughput (predicted on {}; ms)", r.serve.front().hardware);
  TextTable& t = lat.table;
  t.add_column("step", Align::left);
  if (executed) t.add_column("run", Align::left);
  for (const char* c : {"req/s", "out tok/s", "vs first", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
                        "ITL p50", "E2E p50", "E2E p99", "goodput", "SLO met", "preempt", "rejected"})
    t.add_column(c);
  for (const ServeStepResult& s : r.serve) {
    if (!s.does_not_fit.empty()) {
      std::vector<std::string> row{s.step};
      if (executed) row.emplace_back("predicted");
      row.resize(t.columns(), "—");
      t.add_row(std::move(row));
      continue;
    }
    const ServeMetrics& m = s.predicted.metrics;
    const double predicted_vs_first = m.output_throughput / base.output_throughput;
    std::vector<std::string> row{s.step};
    if (executed) row.emplace_back("predicted");
    for (std::string c : {format_sig3(m.request_throughput), format_rate(m.output_throughput),
                          base.output_throughput > 0 ? format_speedup(predicted_vs_first) : "—"})
      row.push_back(std::move(c));
    for (std::string& c : latency_cells(m)) row.push_back(std::move(c));
    t.add_row(std::move(row));
    if (!s.executed) continue;

    const ServeMetrics& x = s.executed->metrics;
    const ServeMetrics& x_base = measured_base->executed->metrics;
    const double measured_vs_first = x.output_throughput / x_base.output_throughput;
    std::vector<std::string> measured{
        s.step, "measured", format_sig3(x.request_throughput), format_rate(x.output_throughput),
        same_base && x_base.output_throughput > 0 ? format_speedup(measured_vs_first) : "—"};
    for (std::string& c : latency_cells(x)) measured.push_back(std::move(c));
    t.add_row(std::move(measured));
    std::vector<std::string> errors{
        s.step, "error", error(m.request_throughput, x.request_throughput),
        error(m.output_throughput, x.output_throughput),
        same_base && &s != measured_base ? error(predicted_vs_first, measured_vs_first) : ""};
    for (std::string& c : latency_errors(m, x)) errors.push_back(std::move(c));
    t.add_row(std::move(errors));
  }
  lat.notes.push_back(
      "vLLM's benchmark definitions: TTFT arrival to first token; TPOT (E2E − TTFT) / (output − 1) per request; "
      "ITL every gap between tokens; percentiles interpolated; throughputs over the run (time 0 to the last token)");
  lat.notes.push_back("goodput: requests/s meeting every SLO; vs first: output tokens/s against the first step");
  if (executed) {
    lat.notes.push_back(fmt::format(
        "measured: the same requests through the same scheduler, each engine step run on {}; error: (predicted − "
        "measured) / measured",
        r.backend));
    if (!same_base && executed_steps(r) > 1)
      lat.notes.push_back(
          fmt::format("the first step did not execute: \"Engine steps\" gives the measured speedups, against {}",
                      measured_base->step));
  }
  for (const ServeStepResult& s : r.serve)
    if (!s.not_executed.empty()) {
      lat.notes.push_back("not executed: " + s.not_executed);
      break;
    }
  for (const ServeStepResult& s : r.serve)
    if (!s.does_not_fit.empty()) lat.notes.push_back(fmt::format("{} does not fit: {}", s.step, s.does_not_fit));
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
    if (!s.does_not_fit.empty()) {
      std::vector<std::string> row{s.step};
      row.resize(e.columns() - 1, "—");
      row.push_back("does not fit its GPU (note above)");
      e.add_row(std::move(row));
      continue;
    }
    const ServeMetrics& m = s.predicted.metrics;
    const KvPool& p = s.predicted.pool;
    e.add_row({s.step, count(m.steps), format_sig3(m.mean_batch), format_sig3(m.mean_step_tokens),
               ms(m.mean_step_time), ms(m.queue.median), ms(m.queue.p99),
               fmt::format("{} × {}", count(p.blocks), p.block), pct(m.kv_utilization_mean),
               pct(m.kv_utilization_max), pct(m.prefix_hit_rate), s.scheduler});
  }
  eng.notes.push_back("KV pool: blocks × tokens per block (one max_seq reservation per block without paged_kv); KV use: "
                      "held blocks over the pool, weighted by step time");
  for (const ServeStepResult& s : r.serve) {
    const ServeMetrics& m = s.predicted.metrics;
    if (m.kv_capped_batches > 0)
      eng.notes.push_back(fmt::format(
          "{}: the KV pool held {} of {} batches below max_batch while more requests waited (the smallest {} "
          "sequences): their KV did not fit{}",
          s.step, count(m.kv_capped_batches), count(m.batches), m.kv_capped_smallest,
          s.predicted.config.paged ? "" : " (each sequence reserves max_seq without paged_kv)"));
  }
  out.push_back(std::move(eng));
  if (std::optional<ReportSection> gpus = layouts_section(r)) out.push_back(std::move(*gpus));
  if (std::optional<ReportSection> rep = replicas_section(r)) out.push_back(std::move(*rep));
  if (std::optional<ReportSection> spec = speculative_section(r)) out.push_back(std::move(*spec));
  if (std::optional<ReportSection> kv = transfers_section(r)) out.push_back(std::move(*kv));
  if (executed) out.push_back(engine_steps_section(r, *measured_base));

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
  bool executed = false;
  for (const auto& r : points)
    for (const ServeStepResult& st : r.serve) executed = executed || st.executed.has_value();
  ReportSection s;
  s.title = executed ? "Sweep summary (serving, predicted and measured; ms)" : "Sweep summary (serving, predicted; ms)";
  TextTable& t = s.table;
  for (const auto& k : keys) t.add_column(k);
  t.add_column("step", Align::left);
  for (const char* c : {"req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99",
                        "goodput", "SLO met", "rejected"})
    t.add_column(c);
  // The executed runs' headline figures beside the predicted ones ("—" where a step did not execute).
  if (executed)
    for (const char* c : {"meas out tok/s", "meas TTFT p50", "meas TPOT p50", "meas E2E p99"}) t.add_column(c);
  for (const auto& r : points)
    for (const ServeStepResult& st : r.serve) {
      if (!st.does_not_fit.empty()) continue;  // noted in the point's own report
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
      if (executed) {
        const ServeMetrics* x = st.executed ? &st.executed->metrics : nullptr;
        for (std::string c : {x ? format_rate(x->output_throughput) : "—", x ? ms(x->ttft.median) : "—",
                              x ? ms(x->tpot.median) : "—", x ? ms(x->e2e.p99) : "—"})
          row.push_back(std::move(c));
      }
      t.add_row(std::move(row));
    }
  if (t.empty()) return std::nullopt;
  return s;
}

}  // namespace perfsim
