// format_trace: a run's steps as Chrome trace events (trace.hpp).
#include "core/report/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/builders/streams.hpp"
#include "core/cost/cost_model.hpp"
#include "core/graph/op_shape.hpp"
#include "core/parallel/micro_batches.hpp"
#include "core/config/size_text.hpp"
#include "core/version.hpp"

namespace perfsim {

namespace {

using json = nlohmann::ordered_json;

constexpr int step_track = 0;   // the step's span
constexpr int host_track = 99;  // the host issuing the ops

// A stream's track: its tid and name.
int track_of(int stream) { return stream + 1; }

std::string stream_name(int stream) {
  switch (stream) {
    case 0: return "main stream";
    case copy_stream: return "copy stream";
    case gather_stream: return "gather stream (ZeRO-3)";
    case gradient_stream: return "gradient stream";
    case pipeline_stream: return "pipeline (activations sent)";
    case context_stream: return "context (ring attention)";
    case pipeline_grad_stream: return "pipeline (gradients sent)";
    case pipeline_recv_stream: return "pipeline (activations received)";
    case pipeline_grad_recv_stream: return "pipeline (gradients received)";
    default: return fmt::format("stream {}", stream);
  }
}

double us(double seconds) { return seconds * 1e6; }

json metadata(const char* what, int pid, int tid, const std::string& name) {
  json e{{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
  return e;
}

json span(const std::string& name, const std::string& category, int pid, int tid, double start, double end,
          json args = json::object()) {
  return json{{"ph", "X"}, {"name", name},          {"cat", category}, {"pid", pid},
              {"tid", tid}, {"ts", us(start)},      {"dur", us(std::max(0.0, end - start))}, {"args", std::move(args)}};
}

// One op's arguments: what it is and both of its times.
json op_args(const StepResult& s, std::size_t i) {
  const Op& op = s.graph.ops[i];
  json a;
  a["kind"] = std::string(name_of(op.kind));
  a["class"] = std::string(name_of(class_of(op.kind)));
  a["dtype"] = name_of(op.dtype);
  a["shape"] = op_shape_text(op, s.graph);
  a["stream"] = op.stream;
  a["count"] = op.count;
  if (i < s.predicted.ops.size()) {
    const OpCost& c = s.predicted.ops[i];
    a["flops"] = c.flops;
    a["bytes"] = c.bytes;
    a["bound"] = c.compute_bound ? "compute" : "memory";
    a["predicted_us"] = us(c.time);
  }
  if (s.measured && i < s.measured->ops.size() && s.measured->ops[i].executed) {
    const double m = s.measured->ops[i].median;
    a["measured_us"] = us(m);
    if (i < s.predicted.ops.size() && m > 0) a["error"] = relative_error(s.predicted.ops[i].time, m);
  }
  return a;
}

class TraceWriter {
 public:
  void add_step(const RunResult& r, const StepResult& s) {
    const std::string label = fmt::format("{}{} / {}", r.scenario,
                                          r.sweep_point.empty() ? "" : " [" + sweep_label(r.sweep_point) + "]", s.step);
    const int predicted_pid = ++m_pid;
    add_predicted(s, predicted_pid, label);
    if (s.measured && s.measured->ops.size() == s.graph.ops.size()) add_measured(r, s, ++m_pid, label);
    for (const RankMeasurement& rm : s.rank_measured)
      if (!rm.timeline.empty()) add_rank(s, rm, ++m_pid, label);
  }

  void add_serve(const RunResult& r) {
    if (r.serve.empty()) return;
    m_pid = add_serve_processes(r, m_pid, m_events);
    m_serve = true;
  }

  [[nodiscard]] std::string text() const {
    json root;
    root["traceEvents"] = m_events;
    root["displayTimeUnit"] = "ms";
    root["otherData"] = {{"producer", fmt::format("perfsim {}", perfsim_version)},
                         {"timelines", "predicted: the cost model's stream timeline; measured: the stream timeline "
                                       "of the measured per-op medians; measured · rank R: where each op of the "
                                       "rank ran in its run of median length, waits for other ranks included"}};
    if (m_serve)
      root["otherData"]["serve"] = fmt::format(
          "serve · STEP: the serving engine's predicted run of that stack step: a span per engine step, counters "
          "(batch, tokens per step, KV blocks used % of the pool, waiting requests) and the first {} served "
          "requests as async slices (queued, prefill, decode); with more requests served, the engine steps up to "
          "the last traced request's end; serve · STEP (measured, BACKEND): the same for the run the backend "
          "executed, its engine steps' args adding device_us, host_us, predicted_us and error",
          grouped(static_cast<int64_t>(serve_trace_requests)));
    return root.dump(1) + "\n";
  }

 private:
  void name_process(int pid, const std::string& name, const std::set<int>& streams, bool host) {
    m_events.push_back(metadata("process_name", pid, 0, name));
    m_events.push_back(json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
                            {"args", {{"sort_index", pid}}}});
    m_events.push_back(metadata("thread_name", pid, step_track, "step"));
    for (int stream : streams) m_events.push_back(metadata("thread_name", pid, track_of(stream), stream_name(stream)));
    if (host) m_events.push_back(metadata("thread_name", pid, host_track, "host issue"));
  }

  void add_ops(const StepResult& s, int pid, const std::vector<TimelineSpan>& spans) {
    for (std::size_t i = 0; i < spans.size() && i < s.graph.ops.size(); ++i) {
      const Op& op = s.graph.ops[i];
      m_events.push_back(span(op.name, std::string(name_of(class_of(op.kind))), pid, track_of(op.stream),
                              spans[i].start, spans[i].end, op_args(s, i)));
    }
  }

  // The host issues the ops one after another, in program order.
  void add_host(const StepResult& s, int pid, const std::vector<double>& issue) {
    double t = 0;
    for (std::size_t i = 0; i < issue.size(); ++i) {
      const double d = issue[i] * s.graph.ops[i].count;
      if (d <= 0) continue;
      m_events.push_back(span(s.graph.ops[i].name, "host", pid, host_track, t, t + d));
      t += d;
    }
  }

  static std::set<int> streams_of(const Graph& g) {
    std::set<int> out;
    for (const Op& op : g.ops) out.insert(op.stream);
    return out;
  }

  void add_predicted(const StepResult& s, int pid, const std::string& label) {
    const Prediction& p = s.predicted;
    std::vector<double> issue;
    for (const OpCost& c : p.ops) issue.push_back(s.graph.graphed ? 0.0 : (c.dispatch_time > 0 ? c.dispatch_time : c.launch_time));
    const bool host = std::any_of(issue.begin(), issue.end(), [](double d) { return d > 0; });
    name_process(pid, fmt::format("predicted · {} ({})", label, p.hardware), streams_of(s.graph), host);
    const double makespan = p.step_time - p.host_time;
    m_events.push_back(span(s.step, "step", pid, step_track, 0, p.step_time,
                            {{"step_time_us", us(p.step_time)}, {"host_overhead_us", us(p.host_time)}}));
    if (p.host_time > 0) m_events.push_back(span("host overhead", "step", pid, step_track, makespan, p.step_time));
    add_ops(s, pid, p.timeline);
    if (host) add_host(s, pid, issue);
  }

  void add_measured(const RunResult& r, const StepResult& s, int pid, const std::string& label) {
    const Measurement& m = *s.measured;
    std::vector<double> medians, issue;
    for (const OpMeasurement& om : m.ops) {
      medians.push_back(om.median);
      issue.push_back(om.host);
    }
    const bool host = std::any_of(issue.begin(), issue.end(), [](double d) { return d > 0; });
    name_process(pid, fmt::format("measured · {} ({}, {})", label, m.backend, r.device), streams_of(s.graph), host);
    m_events.push_back(span(s.step, "step", pid, step_track, 0, m.step_time, {{"step_time_us", us(m.step_time)}}));
    // A GPU copies host data beside its kernels, a CPU not (as the measured step time has it).
    add_ops(s, pid, timeline_spans(s.graph, medians, m.backend != "cpu").ops);
    if (host) add_host(s, pid, issue);
  }

  // One rank's run as it happened (its run of median length): every op of its graph as it ran,
  // a pipeline's micro-batches unrolled, at its real start and end, waits for the other ranks
  // (the bubble) included.
  void add_rank(const StepResult& s, const RankMeasurement& rm, int pid, const std::string& label) {
    std::set<int> streams;
    double end = 0;
    for (const RankMeasurement::Span& op : rm.timeline) {
      streams.insert(op.stream);
      end = std::max(end, op.end);
    }
    name_process(pid, fmt::format("measured · {} · rank {} (stage {}, {})", label, rm.rank, rm.stage, rm.host),
                 streams, false);
    m_events.push_back(span(s.step, "step", pid, step_track, 0, end,
                            {{"rank", rm.rank}, {"stage", rm.stage}, {"run_us", us(end)},
                             {"step_time_us", us(rm.step_time)}, {"exposed_communication_us", us(rm.exposed_communication)}}));
    for (const RankMeasurement::Span& op : rm.timeline) {
      std::string base;
      const int micro = micro_batch_of(op.op, &base);
      json args{{"stream", op.stream}, {"measured_us", us(op.end - op.start)}};
      if (micro >= 0) args["micro_batch"] = micro;
      m_events.push_back(span(op.op, "rank", pid, track_of(op.stream), op.start, op.end, std::move(args)));
    }
  }

  json m_events = json::array();
  int m_pid = 0;
  bool m_serve = false;
};

}  // namespace

std::string format_trace(const std::vector<RunResult>& results) {
  TraceWriter w;
  for (const RunResult& r : results) {
    for (const StepResult& s : r.steps) w.add_step(r, s);
    w.add_serve(r);
  }
  return w.text();
}

}  // namespace perfsim
