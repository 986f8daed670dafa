// `perfsim search` on a serve{} scenario printed: the header, the best services and the pruned
// ones grouped by engine as text; every candidate as JSON or CSV.
#include "core/report/serve_search.hpp"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/report/text_table.hpp"
#include "core/report/validation.hpp"
#include "core/serve/layout_search.hpp"
#include "core/serve/scheduler_config.hpp"
#include "core/text.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

std::string chunk_text(int64_t chunk) { return chunk > 0 ? std::to_string(chunk) : "off"; }

std::string dollars(double usd) { return usd > 0 ? fmt::format("${:.2f}", usd) : "-"; }

std::string p99(const LatencyStats& s) { return s.count > 0 ? format_duration(s.p99) : "-"; }

std::string slo_text(const Slo& s, double attainment) {
  std::vector<std::string> parts;
  if (s.ttft > 0) parts.push_back(fmt::format("TTFT {}", format_duration(s.ttft)));
  if (s.tpot > 0) parts.push_back(fmt::format("TPOT {}", format_duration(s.tpot)));
  if (s.e2e > 0) parts.push_back(fmt::format("E2E {}", format_duration(s.e2e)));
  if (parts.empty()) return "none (goodput is the throughput)";
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return fmt::format("{}, met by {} of requests", out, format_percent(attainment));
}

json stats_json(const LatencyStats& s) {
  json j;
  j["p50_s"] = s.median;
  j["p99_s"] = s.p99;
  return j;
}

}  // namespace

std::string serve_search_failure(const ServeSearchResult& r) {
  if (r.priced > 0) return "";
  if (r.candidates.empty())
    return fmt::format("no engine of --tp · --pp GPUs divides --gpus {}; choose degrees whose product divides it",
                       r.gpus);
  const ServeCandidate& first = r.candidates.front();
  return fmt::format("no serving layout of {} GPU{} could run {} on {} (of {} candidates; e.g. {}: {}); add GPUs or "
                     "choose other --tp/--pp",
                     r.gpus, r.gpus == 1 ? "" : "s", r.model, r.hardware, r.candidates.size(), layout_words(first),
                     first.pruned);
}

std::string format_serve_search_table(const ServeSearchReportInput& in) {
  const ServeSearchResult& r = *in.result;
  std::vector<std::pair<std::string, std::string>> head = {
      {"scenario", in.scenario},
      {"file", in.file},
      {"model", r.model},
      {"hardware", r.price_per_hour > 0 ? fmt::format("{} (${:.2f} per GPU-hour)", r.hardware, r.price_per_hour)
                                        : r.hardware},
      {"traffic", in.traffic},
      {"SLO", slo_text(r.slo, r.attainment)},
      {"step", in.step},
      {"scheduler", in.scheduler},
      {"GPUs", std::to_string(r.gpus)},
      {"searched", fmt::format("{} services: {} priced, {} meet the SLO, {} pruned", r.candidates.size(), r.priced,
                               r.meeting, static_cast<int64_t>(r.candidates.size()) - r.priced)},
  };
  if (!in.note.empty()) head.insert(head.begin() + 2, {"note", in.note});
  std::erase_if(head, [](const auto& kv) { return kv.second.empty(); });
  std::string out = format_key_values(head);

  TextTable t;
  t.add_column("#");
  t.add_column("layout", Align::left);
  t.add_column("max_batch");
  t.add_column("chunk");
  t.add_column("goodput/GPU");
  t.add_column("out tok/s/GPU");
  t.add_column("TTFT p99");
  t.add_column("TPOT p99");
  t.add_column("$/M tokens");
  t.add_column("limiter", Align::left);
  const std::size_t shown = std::min<std::size_t>(static_cast<std::size_t>(r.priced),
                                                  static_cast<std::size_t>(std::max(0, in.top)));
  for (std::size_t i = 0; i < shown; ++i) {
    const ServeCandidate& c = r.candidates[i];
    t.add_row({std::to_string(i + 1), layout_words(c), std::to_string(c.max_batch), chunk_text(c.chunk),
               format_sig3(c.goodput_per_gpu), format_rate(c.output_per_gpu), p99(c.metrics.ttft), p99(c.metrics.tpot),
               dollars(c.cost_per_million), describe(c.limiter)});
  }
  out += fmt::format("\nTop {} of {} services by goodput per GPU — predicted on {}\n", shown, r.priced, r.hardware);
  out += t.empty() ? "  (no service was priced)\n" : t.to_text(2);
  out += "  · layout: R × ENGINE (R replicas behind the router), xPyD × ENGINE (x prefill and y decode engines),\n"
         "    or one ENGINE; chunk: chunked_prefill tokens per step\n";
  out += "  · goodput/GPU: requests/s meeting every SLO bound over the GPUs; ties go to output tokens/s per GPU\n";
  out += "  · limiter: KV memory (preempted, rejected or the pool 98% full), else none when the SLO is met, else\n"
         "    queue (p99 wait for a first step above the TTFT bound), else the bound its p99 exceeds most\n";

  // The pruned, by engine and the kind of reason (its words before the first colon): how many,
  // and the first reason in full.
  struct Pruned {
    std::string engine, kind, first;
    int64_t count = 0;
  };
  std::vector<Pruned> groups;
  for (const ServeCandidate& c : r.candidates) {
    if (c.priced) continue;
    const std::string e = engine_words(c.layout.tp, c.layout.pp), kind = c.pruned.substr(0, c.pruned.find(':'));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Pruned& g) { return g.engine == e && g.kind == kind; });
    if (it == groups.end()) groups.push_back({e, kind, c.pruned, 1});
    else ++it->count;
  }
  if (!groups.empty()) {
    TextTable p;
    p.add_column("engine", Align::left);
    p.add_column("services");
    p.add_column("reason (the first)", Align::left);
    for (const Pruned& g : groups) p.add_row({g.engine, std::to_string(g.count), g.first});
    out += "\nPruned services\n";
    out += p.to_text(2);
  }
  if (r.engines_skipped > 0)
    out += fmt::format("  · {} engine{} of tp · pp GPUs not dividing {} left out\n", r.engines_skipped,
                       r.engines_skipped == 1 ? "" : "s", r.gpus);
  return out;
}

std::string format_serve_search_json(const ServeSearchReportInput& in) {
  const ServeSearchResult& r = *in.result;
  json j;
  j["scenario"] = in.scenario;
  j["file"] = in.file;
  j["model"] = r.model;
  j["hardware"] = r.hardware;
  j["price_per_gpu_hour"] = r.price_per_hour;
  j["gpus"] = r.gpus;
  j["traffic"] = in.traffic;
  j["requests"] = r.requests;
  json slo;
  slo["ttft_s"] = r.slo.ttft;
  slo["tpot_s"] = r.slo.tpot;
  slo["e2e_s"] = r.slo.e2e;
  slo["attainment"] = r.attainment;
  j["slo"] = slo;
  if (!in.step.empty()) j["step"] = in.step;
  if (!in.scheduler.empty()) j["scheduler"] = in.scheduler;
  if (!in.note.empty()) j["note"] = in.note;
  json counts;
  counts["candidates"] = r.candidates.size();
  counts["priced"] = r.priced;
  counts["meeting_slo"] = r.meeting;
  counts["pruned"] = static_cast<int64_t>(r.candidates.size()) - r.priced;
  counts["engines_left_out"] = r.engines_skipped;
  j["counts"] = counts;
  json rows = json::array();
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const ServeCandidate& c = r.candidates[i];
    json row;
    if (c.priced) row["rank"] = i + 1;
    row["layout"] = layout_words(c);
    row["replicas"] = c.layout.dp;
    row["tp"] = c.layout.tp;
    row["pp"] = c.layout.pp;
    row["prefill_engines"] = c.prefill_engines;
    row["decode_engines"] = c.decode_engines;
    row["max_batch"] = c.max_batch;
    row["chunked_prefill"] = c.chunk;
    row["priced"] = c.priced;
    if (!c.priced) {
      row["pruned"] = c.pruned;
      rows.push_back(std::move(row));
      continue;
    }
    const ServeMetrics& m = c.metrics;
    json metrics;
    metrics["goodput"] = m.goodput;
    metrics["goodput_per_gpu"] = c.goodput_per_gpu;
    metrics["request_throughput"] = m.request_throughput;
    metrics["output_throughput"] = m.output_throughput;
    metrics["output_throughput_per_gpu"] = c.output_per_gpu;
    metrics["slo_attainment"] = m.slo_attainment;
    metrics["completed"] = m.completed;
    metrics["rejected"] = m.rejected;
    metrics["preemptions"] = m.preemptions;
    metrics["kv_utilization_max"] = m.kv_utilization_max;
    metrics["ttft"] = stats_json(m.ttft);
    metrics["tpot"] = stats_json(m.tpot);
    metrics["e2e"] = stats_json(m.e2e);
    metrics["queue"] = stats_json(m.queue);
    row["metrics"] = metrics;
    row["cost_per_million_tokens"] = c.cost_per_million > 0 ? json(c.cost_per_million) : json(nullptr);
    row["limiter"] = name_of(c.limiter);
    rows.push_back(std::move(row));
  }
  j["candidates"] = std::move(rows);
  return j.dump(2) + "\n";
}

std::string format_serve_search_csv(const ServeSearchReportInput& in) {
  const ServeSearchResult& r = *in.result;
  auto num = [](double v) { return fmt::format("{:.15g}", v); };
  std::string out =
      "rank,layout,replicas,tp,pp,prefill_engines,decode_engines,max_batch,chunked_prefill,priced,goodput_per_gpu,"
      "output_tokens_per_s_per_gpu,ttft_p99_s,tpot_p99_s,slo_attainment,preemptions,cost_per_million_tokens,limiter,"
      "pruned\n";
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const ServeCandidate& c = r.candidates[i];
    const ServeMetrics& m = c.metrics;
    const std::vector<std::string> cells = {
        c.priced ? std::to_string(i + 1) : "", layout_words(c), std::to_string(c.layout.dp),
        std::to_string(c.layout.tp), std::to_string(c.layout.pp), std::to_string(c.prefill_engines),
        std::to_string(c.decode_engines), std::to_string(c.max_batch), std::to_string(c.chunk),
        c.priced ? "true" : "false", c.priced ? num(c.goodput_per_gpu) : "", c.priced ? num(c.output_per_gpu) : "",
        c.priced ? num(m.ttft.p99) : "", c.priced ? num(m.tpot.p99) : "", c.priced ? num(m.slo_attainment) : "",
        c.priced ? std::to_string(m.preemptions) : "", c.priced && c.cost_per_million > 0 ? num(c.cost_per_million) : "",
        c.priced ? name_of(c.limiter) : "", c.pruned};
    out += csv_join(cells);
  }
  return out;
}

}  // namespace perfsim
