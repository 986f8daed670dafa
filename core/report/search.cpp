// `perfsim search` printed: the header, the top layouts and the pruned counts as text, and every
// priced layout as JSON or CSV. Pure functions that return strings.
#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/parallel/search.hpp"
#include "core/report/report.hpp"
#include "core/report/text_table.hpp"
#include "core/report/validation.hpp"
#include "core/text.hpp"
#include "core/units.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

// 1234567 -> "1,234,567"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

int64_t tokens_per_sequence(const Workload& w) {
  return w.phase == Phase::train ? w.seq : w.phase == Phase::prefill ? w.prompt : 1;
}

std::string workload_line(const Workload& w) {
  switch (w.phase) {
    case Phase::train: return fmt::format("train seq={} (micro-batch and grad_accum vary per layout)", w.seq);
    case Phase::prefill: return fmt::format("prefill prompt={} (the batch is split over the replicas)", w.prompt);
    case Phase::decode:
      return fmt::format("decode prompt={} new_tokens={} (the batch is split over the replicas)", w.prompt,
                         w.new_tokens);
  }
  return "";
}

bool any_recompute(const SearchResult& r) {
  for (const SearchCandidate& c : r.layouts)
    if (c.recompute) return true;
  return false;
}

std::string limiter_cell(const SearchCandidate& c, double memory_bytes) {
  switch (c.limiter) {
    case Limiter::memory:
      if (!c.fits) return "memory (does not fit)";
      return memory_bytes > 0 ? fmt::format("memory ({} used)", format_percent(c.memory_peak / memory_bytes))
                              : "memory";
    case Limiter::bubble: return fmt::format("bubble ({} of step)", format_percent(c.bubble_fraction));
    case Limiter::communication:
      return fmt::format("communication ({} of step)",
                         format_percent(c.step_time > 0 ? c.exposed_communication / c.step_time : 0.0));
    case Limiter::compute: return "compute";
  }
  return "";
}

std::string layout_text(const SearchCandidate& c) {
  const std::string d = describe(c.layout);
  return d;
}

json layout_json(const ParallelSpec& p) {
  json j;
  j["dp"] = p.dp;
  j["tp"] = p.tp;
  j["pp"] = p.pp;
  j["cp"] = p.cp;
  j["sp"] = p.sp;
  j["zero"] = p.zero;
  j["interleave"] = p.interleave;
  j["schedule"] = name_of(p.pipeline_schedule());
  return j;
}

}  // namespace

std::string search_failure(const SearchResult& r) {
  if (r.fitting > 0) return "";
  if (r.evaluated == 0) {
    std::string reasons;
    for (int i = 0; i < prune_reason_count; ++i)
      if (r.pruned[i] > 0)
        reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", r.pruned[i],
                               describe(static_cast<PruneReason>(i)));
    return fmt::format("no valid layout of {} GPU{} for {} (of {} enumerated: {}); choose another --gpus or "
                       "--global-batch",
                       r.gpus, r.gpus == 1 ? "" : "s", r.model, r.enumerated, reasons);
  }
  const SearchCandidate* least = &r.layouts.front();
  for (const SearchCandidate& c : r.layouts)
    if (c.memory_peak < least->memory_peak) least = &c;
  return fmt::format("no layout of {} GPU{} fits memory on {}: the leanest of {} priced ({}, micro-batch {}) needs "
                     "{} of {}; add GPUs, --recompute, or a smaller --micro-batch",
                     r.gpus, r.gpus == 1 ? "" : "s", r.hardware, r.evaluated, describe(least->layout),
                     least->micro_batch, format_bytes(least->memory_peak), format_bytes(r.memory_bytes));
}

std::string format_search_table(const SearchReportInput& in) {
  const SearchResult& r = *in.result;
  std::string out;
  std::vector<std::pair<std::string, std::string>> head = {
      {"scenario", in.scenario},
      {"file", in.file},
      {"model", r.model},
      {"hardware", fmt::format("{} ({} per GPU)", r.hardware, format_bytes(r.memory_bytes))},
      {"workload", workload_line(r.workload)},
      {"global batch", fmt::format("{} sequence{} ({} tokens)", grouped(r.global_batch), r.global_batch == 1 ? "" : "s",
                                   grouped(r.global_batch * tokens_per_sequence(r.workload)))},
      {"GPUs", std::to_string(r.gpus)},
      {"searched", fmt::format("{} layouts: {} priced, {} fit memory", r.enumerated, r.evaluated, r.fitting)},
  };
  if (!in.note.empty()) head.insert(head.begin() + 2, {"note", in.note});
  // After the workload: which step's graph was laid out, and whether recompute was tried.
  auto after_workload = std::find_if(head.begin(), head.end(), [](const auto& kv) { return kv.first == "workload"; });
  if (after_workload != head.end()) ++after_workload;
  if (!in.recompute.empty()) after_workload = head.insert(after_workload, {"recompute", in.recompute});
  if (!in.step.empty()) head.insert(after_workload, {"step", in.step});
  out += format_key_values(head);

  const bool recompute = any_recompute(r);
  TextTable t;
  t.add_column("#");
  t.add_column("layout", Align::left);
  t.add_column("mb");
  t.add_column("accum");
  if (recompute) t.add_column("recompute", Align::left);
  t.add_column("tok/s");
  t.add_column("tok/s/GPU");
  t.add_column("MFU");
  t.add_column("step");
  t.add_column("bubble");
  t.add_column("exposed comm");
  t.add_column("mem/GPU");
  t.add_column("limiter", Align::left);
  const std::size_t shown = std::min<std::size_t>(r.layouts.size(), static_cast<std::size_t>(std::max(0, in.top)));
  for (std::size_t i = 0; i < shown; ++i) {
    const SearchCandidate& c = r.layouts[i];
    std::vector<std::string> row = {std::to_string(i + 1), layout_text(c), std::to_string(c.micro_batch),
                                    std::to_string(c.grad_accum)};
    if (recompute) row.push_back(c.recompute ? "full" : "-");
    row.push_back(format_rate(c.tokens_per_second));
    row.push_back(format_rate(c.tokens_per_second_per_gpu));
    row.push_back(format_percent(c.mfu));
    row.push_back(format_duration(c.step_time));
    row.push_back(c.layout.pp > 1 ? format_percent(c.bubble_fraction) : "-");
    row.push_back(format_duration(c.exposed_communication));
    row.push_back(fmt::format("{}{}", format_bytes(c.memory_peak),
                              c.layout.pp > 1 ? fmt::format(" (stage {})", c.worst_rank) : ""));
    row.push_back(limiter_cell(c, r.memory_bytes));
    t.add_row(std::move(row));
  }
  out += fmt::format("\nTop {} of {} layouts by tokens/s — predicted on {}\n", shown, r.evaluated, r.hardware);
  if (t.empty())
    out += "  (no layout was priced)\n";
  else
    out += t.to_text(2);
  out += "  · layout: the degrees above 1 (dp = GPUs / (tp · pp · cp)); mb: sequences per micro-batch; accum: "
         "micro-batches per step\n";
  out += "  · tok/s: every replica's tokens per second; MFU over every GPU; mem/GPU: the worst rank's peak\n";
  out += "  · limiter: memory when under 5% of the GPU is free, else the larger of the pipeline bubble and the\n"
         "    exposed communication when it reaches 5% of the step, else compute\n";
  if (r.fitting < r.evaluated && shown > static_cast<std::size_t>(r.fitting))
    out += "  · layouts that do not fit memory follow those that fit\n";

  TextTable p;
  p.add_column("reason", Align::left);
  p.add_column("layouts");
  int64_t pruned = 0;
  for (int i = 0; i < prune_reason_count; ++i) {
    if (r.pruned[i] == 0) continue;
    p.add_row({describe(static_cast<PruneReason>(i)), std::to_string(r.pruned[i])});
    pruned += r.pruned[i];
  }
  p.add_row({"total pruned", fmt::format("{} of {}", pruned, r.enumerated)});
  out += "\nPruned layouts\n";
  out += p.to_text(2);
  if (!r.invalid_example.empty()) out += fmt::format("  · e.g. {}\n", r.invalid_example);
  return out;
}

std::string format_search_json(const SearchReportInput& in) {
  const SearchResult& r = *in.result;
  json j;
  j["scenario"] = in.scenario;
  j["file"] = in.file;
  j["model"] = r.model;
  j["hardware"] = r.hardware;
  j["memory_bytes"] = r.memory_bytes;
  j["phase"] = name_of(r.workload.phase);
  j["tokens_per_sequence"] = tokens_per_sequence(r.workload);
  j["gpus"] = r.gpus;
  j["global_batch"] = r.global_batch;
  if (!in.step.empty()) j["step"] = in.step;
  if (!in.recompute.empty()) j["recompute"] = in.recompute;
  json counts;
  counts["enumerated"] = r.enumerated;
  counts["evaluated"] = r.evaluated;
  counts["fitting"] = r.fitting;
  json pruned = json::object();
  for (int i = 0; i < prune_reason_count; ++i) pruned[name_of(static_cast<PruneReason>(i))] = r.pruned[i];
  counts["pruned"] = pruned;
  j["counts"] = counts;
  json rows = json::array();
  for (std::size_t i = 0; i < r.layouts.size(); ++i) {
    const SearchCandidate& c = r.layouts[i];
    json row;
    row["rank"] = i + 1;
    row["layout"] = describe(c.layout);
    row["parallel"] = layout_json(c.layout);
    row["micro_batch"] = c.micro_batch;
    row["grad_accum"] = c.grad_accum;
    row["recompute"] = c.recompute;
    row["tokens_per_s"] = c.tokens_per_second;
    row["tokens_per_s_per_gpu"] = c.tokens_per_second_per_gpu;
    row["mfu"] = c.mfu;
    row["step_time_s"] = c.step_time;
    row["bubble_fraction"] = c.bubble_fraction;
    row["bubble_s"] = c.bubble_time;
    row["exposed_communication_s"] = c.exposed_communication;
    row["memory_peak_bytes"] = c.memory_peak;
    row["worst_stage"] = c.worst_rank;
    row["fits"] = c.fits;
    row["limiter"] = name_of(c.limiter);
    rows.push_back(std::move(row));
  }
  j["layouts"] = std::move(rows);
  return j.dump(2) + "\n";
}

std::string format_search_csv(const SearchReportInput& in) {
  const SearchResult& r = *in.result;
  auto num = [](double v) { return fmt::format("{:.15g}", v); };
  std::string out =
      "rank,layout,dp,tp,pp,cp,sp,zero,interleave,schedule,micro_batch,grad_accum,recompute,tokens_per_s,"
      "tokens_per_s_per_gpu,mfu,step_time_s,bubble_fraction,bubble_s,exposed_communication_s,memory_peak_bytes,"
      "worst_stage,fits,limiter\n";
  for (std::size_t i = 0; i < r.layouts.size(); ++i) {
    const SearchCandidate& c = r.layouts[i];
    const ParallelSpec& p = c.layout;
    const std::vector<std::string> cells = {
        std::to_string(i + 1), describe(p), std::to_string(p.dp), std::to_string(p.tp), std::to_string(p.pp),
        std::to_string(p.cp), p.sp ? "true" : "false", std::to_string(p.zero), std::to_string(p.interleave),
        name_of(p.pipeline_schedule()), std::to_string(c.micro_batch), std::to_string(c.grad_accum),
        c.recompute ? "true" : "false", num(c.tokens_per_second), num(c.tokens_per_second_per_gpu), num(c.mfu),
        num(c.step_time), num(c.bubble_fraction), num(c.bubble_time), num(c.exposed_communication),
        num(c.memory_peak), std::to_string(c.worst_rank), c.fits ? "true" : "false", name_of(c.limiter)};
    out += csv_join(cells);
  }
  return out;
}

}  // namespace perfsim
