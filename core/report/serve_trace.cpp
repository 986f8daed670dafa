// A serving run in the trace (trace.hpp): per stack step (and replica) one process holding the engine's
// predicted steps as spans, its load as counters and the first served requests as async slices,
// and one more alike for the executed run, its steps carrying the cost model's price of each.
#include "core/report/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/report/serve_json.hpp"
#include "core/config/size_text.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

constexpr int engine_track = 0;
constexpr int request_track = 1;

double us(double seconds) { return seconds * 1e6; }

json metadata(const char* what, int pid, int tid, json args) {
  return json{{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// Perfetto names a counter track "<name> <arg>" and chrome://tracing shows the arg as the
// series of track <name>, so the two read alike.
class Counter {
 public:
  Counter(const char* name, const char* series) : m_name(name), m_series(series) {}

  // A sample only when the value changes: the counter holds it until the next one.
  void set(json& events, int pid, double t, const json& value) {
    if (m_last == value) return;
    m_last = value;
    events.push_back(json{{"ph", "C"},
                          {"name", m_name},
                          {"pid", pid},
                          {"tid", engine_track},
                          {"ts", us(t)},
                          {"args", {{m_series, value}}}});
  }

 private:
  const char* m_name;
  const char* m_series;
  json m_last;  // null: no sample yet
};

// `executed`: the executed run's step seconds, added to each step's args.
void add_engine_steps(const EngineRun& run, const std::vector<ExecutedStep>* executed, double window_end, int pid,
                      json& events) {
  Counter batch("batch", "sequences"), tokens("tokens", "per step"), kv("KV blocks", "used %"),
      waiting("waiting", "requests");
  const double blocks = static_cast<double>(run.pool.blocks);
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const StepRecord& s = run.steps[i];
    if (s.start >= window_end) break;
    json args{{"seqs", s.seqs},       {"tokens", s.tokens},   {"prefill_tokens", s.prefill_tokens},
              {"decodes", s.decodes}, {"waiting", s.waiting}, {"kv_used_blocks", s.kv_used_blocks}};
    if (s.swap_blocks > 0) args["swap_blocks"] = s.swap_blocks;
    if (executed != nullptr && i < executed->size()) {
      const ExecutedStep& e = (*executed)[i];
      // Six digits: a wall clock's microseconds carry binary residue past them.
      args["device_us"] = sig6(us(e.device));
      args["host_us"] = sig6(us(e.host));
      args["predicted_us"] = sig6(us(e.predicted));
      if (e.wall > 0) args["error"] = sig6(relative_error(e.predicted, e.wall));
    }
    events.push_back(json{{"ph", "X"},
                          {"name", fmt::format("{} seqs · {} tok", s.seqs, s.tokens)},
                          {"cat", "engine"},
                          {"pid", pid},
                          {"tid", engine_track},
                          {"ts", us(s.start)},
                          {"dur", us(std::max(0.0, s.duration))},
                          {"args", std::move(args)}});
    batch.set(events, pid, s.start, s.seqs);
    tokens.set(events, pid, s.start, s.tokens);
    // Six digits, as the report has them: a small model's cache fills a millionth of a GPU.
    kv.set(events, pid, s.start, sig6(blocks > 0 ? 100 * static_cast<double>(s.kv_used_blocks) / blocks : 0));
    waiting.set(events, pid, s.start, s.waiting);
    // Idle until the next step (waiting for arrivals): nothing runs.
    const double end = s.start + s.duration;
    if (i + 1 == run.steps.size() || run.steps[i + 1].start > end) {
      batch.set(events, pid, end, 0);
      tokens.set(events, pid, end, 0);
    }
  }
}

// A request's life as async slices on its own track: the whole request, and inside it queued
// (arrival to first scheduled), prefill (to its first token) and decode (to its last token).
// A disaggregated request's hand-over: when its prefill ended and how long its KV took to reach
// the decode engine.
struct Handover {
  double prefilled = -1, sent = 0;
};

// id2.local scopes the id to the process: the same request id recurs in every stack step.
void add_request(const RequestRecord& r, int pid, json& events, Handover h = {}) {
  const json id{{"local", fmt::format("0x{:x}", r.request.id)}};
  const json args{{"prompt", r.request.prompt}, {"output", r.generated}, {"preemptions", r.preemptions}};
  // Appends the begin, returns the end: the whole request's end goes after its parts'.
  auto slice = [&](const std::string& name, double begin, double end) {
    events.push_back(json{{"ph", "b"},
                          {"name", name},
                          {"cat", "request"},
                          {"pid", pid},
                          {"tid", request_track},
                          {"ts", us(begin)},
                          {"id2", id},
                          {"args", args}});
    return json{{"ph", "e"},     {"name", name}, {"cat", "request"}, {"pid", pid}, {"tid", request_track},
                {"ts", us(end)}, {"id2", id}};
  };
  const double at = r.request.arrival;
  json whole = slice(fmt::format("request {}", r.request.id), at, r.finished);
  events.push_back(slice("queued", at, r.admitted));
  if (h.prefilled >= 0) {
    // Prefill on one engine, the KV's trip, the wait for the decode engine's first step.
    events.push_back(slice("prefill", r.admitted, h.prefilled));
    events.push_back(slice("KV transfer", h.prefilled, h.prefilled + h.sent));
    events.push_back(slice("decode queue", h.prefilled + h.sent, r.first_token));
  } else {
    events.push_back(slice("prefill", r.admitted, r.first_token));
  }
  events.push_back(slice("decode", r.first_token, r.finished));
  events.push_back(std::move(whole));
}

bool served(const RequestRecord& r) {
  return r.rejected.empty() && r.admitted >= 0 && r.first_token >= 0 && r.finished >= 0;
}

// One engine run of a stack step as its own process: its name says which run (`what`).
// `prefilled` and `sent` (by request id, disaggregated): each request's hand-over.
void add_run_process(const RunResult& r, const ServeStepResult& s, const EngineRun& run,
                     const std::vector<ExecutedStep>* executed, const std::string& what, int pid, json& events,
                     const std::vector<double>* prefilled = nullptr, const std::vector<double>* sent = nullptr) {
  std::vector<const RequestRecord*> traced;
  int64_t served_count = 0;
  double window_end = 0;
  for (const RequestRecord& q : run.requests) {
    if (!served(q)) continue;
    ++served_count;
    if (traced.size() < serve_trace_requests) {
      traced.push_back(&q);
      window_end = std::max(window_end, q.finished);
    }
  }
  // Every engine step, unless some requests are left out: then the steps up to the last traced
  // request's end, so that what the trace holds is complete.
  const bool all = served_count <= static_cast<int64_t>(serve_trace_requests);
  if (all) window_end = std::numeric_limits<double>::infinity();

  std::string name = fmt::format("serve · {}{} / {} ({}", r.scenario,
                                 r.sweep_point.empty() ? "" : " [" + sweep_label(r.sweep_point) + "]", s.step, what);
  if (!all)
    name += fmt::format("; first {} of {} requests", grouped(static_cast<int64_t>(serve_trace_requests)),
                        grouped(served_count));
  name += ")";
  events.push_back(metadata("process_name", pid, 0, {{"name", name}}));
  events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
  events.push_back(metadata("thread_name", pid, engine_track, {{"name", "engine steps"}}));
  events.push_back(metadata("thread_name", pid, request_track, {{"name", "requests"}}));
  add_engine_steps(run, executed, window_end, pid, events);
  for (const RequestRecord* q : traced) {
    Handover h;
    const auto id = static_cast<std::size_t>(q->request.id);
    if (prefilled != nullptr && sent != nullptr && id < prefilled->size() && id < sent->size() &&
        (*prefilled)[id] >= 0 && (*sent)[id] >= 0)
      h = {(*prefilled)[id], (*sent)[id]};
    add_request(*q, pid, events, h);
  }
}

// "replica 2", or with a role "replica 0 (prefill)".
std::string replica_name(std::size_t i, const std::string& role) {
  return role.empty() ? fmt::format("replica {}", i) : fmt::format("replica {} ({})", i, role);
}

}  // namespace

int add_serve_processes(const RunResult& r, int pid, nlohmann::ordered_json& events) {
  for (const ServeStepResult& s : r.serve) {
    if (!s.does_not_fit.empty()) continue;
    // Behind a router (or disaggregated): a process per replica, each with its own engine steps
    // and requests; a disaggregated service's requests with their hand-overs as well.
    const ServePrediction& p = s.predicted;
    if (p.transfers)
      add_run_process(r, s, p.run, nullptr, "predicted, " + s.hardware, ++pid, events, &p.transfers->prefilled,
                      &p.transfers->exposed);
    if (!p.replicas.empty()) {
      for (std::size_t i = 0; i < p.replicas.size(); ++i)
        add_run_process(r, s, p.replicas[i].run, nullptr,
                        fmt::format("predicted, {}, {}", s.hardware, replica_name(i, p.replicas[i].role)), ++pid,
                        events);
    } else if (!p.transfers) {
      add_run_process(r, s, p.run, nullptr, "predicted, " + s.hardware, ++pid, events);
    }
    // The executed run beside it, on the same time axis (seconds from the run's start), and its
    // replicas when they ran on ranks.
    if (!s.executed) continue;
    const ServeStepResult::Executed& x = *s.executed;
    const bool handed = !x.kv_transfers.empty();
    add_run_process(r, s, x.run, &x.steps, "measured, " + r.backend, ++pid, events, handed ? &x.kv_prefilled : nullptr,
                    handed ? &x.kv_transfers : nullptr);
    for (std::size_t i = 0; i < x.replicas.size(); ++i)
      add_run_process(r, s, x.replicas[i].run, nullptr,
                      fmt::format("measured, {}, {}", r.backend, replica_name(i, x.replicas[i].role)), ++pid, events);
  }
  return pid;
}

}  // namespace perfsim
