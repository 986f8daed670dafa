// execute_on_ranks: one rank's share of a parallel step, and rank 0's view of
// all of them.
#include "core/run/rank_execution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "core/cost/cost_model.hpp"
#include "core/errors.hpp"
#include "core/parallel/micro_batches.hpp"

namespace perfsim {

std::string layout_unexecutable_reason(const ParallelSpec& layout, const Communicator& ranks) {
  if (ranks.size() != layout.gpus())
    return fmt::format(
        "the layout has {} GPUs ({}) and this run {} ranks: start it with {} ranks (mpirun -np {}, or --gpus {})",
        layout.gpus(), describe(layout), ranks.size(), layout.gpus(), layout.gpus(), layout.gpus());
  return {};
}

int stage_of_rank(const ParallelSpec& layout, int rank) { return rank / layout.pp_stride(); }

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// Ends the process with `message` unless destroyed within `seconds` (0: never). Collectives
// block without a deadline of their own (MPI's, NCCL's), so a lost peer would hang every rank;
// a rank that exits makes the launcher end the others.
class Watchdog {
 public:
  Watchdog(double seconds, std::string message) : m_message(std::move(message)) {
    if (seconds <= 0) return;
    m_thread = std::thread([this, seconds] {
      std::unique_lock lock(m_mutex);
      if (m_done.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return m_finished; })) return;
      std::fprintf(stderr, "perfsim: error: %s\n", m_message.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    });
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    if (!m_thread.joinable()) return;
    {
      std::lock_guard lock(m_mutex);
      m_finished = true;
    }
    m_done.notify_one();
    m_thread.join();
  }

 private:
  std::string m_message;
  std::mutex m_mutex;
  std::condition_variable m_done;
  bool m_finished = false;
  std::thread m_thread;
};

// How much of the measured step the collectives add: the timeline of the measured medians less
// the same timeline with the collectives at zero (what the step would take were they free); in
// total and per collective kind.
struct Exposed {
  double total = 0;
  std::map<Collective, double> by_kind;
};

Exposed exposed_communication(const Graph& g, const Measurement& m, bool copy_engines) {
  const std::size_t n = std::min(g.ops.size(), m.ops.size());
  std::vector<double> all;
  for (std::size_t i = 0; i < n; ++i) all.push_back(m.ops[i].median);
  const double step = timeline_makespan(g, all, copy_engines);
  // The step with the collectives `free` says are free.
  auto without = [&](const std::function<bool(const Op&)>& free) {
    std::vector<double> t = all;
    for (std::size_t i = 0; i < n; ++i)
      if (g.ops[i].kind == OpKind::collective && free(g.ops[i])) t[i] = 0;
    return std::max(0.0, step - timeline_makespan(g, t, copy_engines));
  };
  Exposed e;
  e.total = without([](const Op&) { return true; });
  for (Collective c : all_collectives) {
    const bool present = std::any_of(g.ops.begin(), g.ops.end(), [&](const Op& op) {
      return op.kind == OpKind::collective && op.attrs.collective == c;
    });
    if (present) e.by_kind[c] = without([c](const Op& op) { return op.attrs.collective == c; });
  }
  return e;
}

// The run of a stage's micro-batches as a measurement of the stage graph the report shows: each
// op's median the mean of its copies' (the stage graph counts it once per micro-batch), its
// minimum the least; the step time, wall time and memory the run's, bubble included.
Measurement fold_micro_batches(const Measurement& run, const MicroBatchGraph& steps, const Graph& stage) {
  Measurement m = run;
  m.ops.assign(stage.ops.size(), OpMeasurement{});
  std::vector<int> copies(stage.ops.size(), 0);
  for (std::size_t i = 0; i < run.ops.size() && i < steps.origin.size(); ++i) {
    const auto o = static_cast<std::size_t>(steps.origin[i]);
    OpMeasurement& f = m.ops[o];
    const OpMeasurement& c = run.ops[i];
    f.min = copies[o] == 0 ? c.min : std::min(f.min, c.min);
    f.median += c.median;
    f.host += c.host;
    f.device += c.device;
    f.executed = f.executed || c.executed;
    ++copies[o];
  }
  m.time_by_class.clear();
  for (std::size_t o = 0; o < stage.ops.size(); ++o) {
    OpMeasurement& f = m.ops[o];
    f.op = stage.ops[o].id;
    if (copies[o] > 0) {
      f.median /= copies[o];
      f.host /= copies[o];
      f.device /= copies[o];
    }
    m.time_by_class[class_of(stage.ops[o].kind)] += f.median * stage.ops[o].count;
  }
  return m;
}

// What each rank sends rank 0: its figures as one line of text, the exposed time per kind as
// "kind=seconds,..." ("-" for none), the host last (it may hold spaces).
std::string summary_line(const Measurement& m, const Communicator& ranks, int stage, const Exposed& exposed) {
  std::string kinds;
  for (const auto& [c, seconds] : exposed.by_kind)
    kinds += fmt::format("{}{}={:.17g}", kinds.empty() ? "" : ",", static_cast<int>(c), seconds);
  return fmt::format("{} {} {:.17g} {:.17g} {:.17g} {:.17g} {}", ranks.rank(), stage, m.step_time, m.executed_wall,
                     m.peak_bytes, exposed.total, kinds.empty() ? "-" : kinds) +
         " " + ranks.host();
}

// Where the rank's ops ran (OpMeasurement::start, end), one "start end stream name" line each,
// for the trace; empty when the backend recorded none.
std::string timeline_text(const Graph& ran, const Measurement& m) {
  std::string out;
  for (std::size_t i = 0; i < m.ops.size() && i < ran.ops.size(); ++i)
    if (m.ops[i].start >= 0 && m.ops[i].end >= m.ops[i].start)
      out += fmt::format("{:.9g} {:.9g} {} {}\n", m.ops[i].start, m.ops[i].end, ran.ops[i].stream, ran.ops[i].name);
  return out;
}

std::vector<RankMeasurement::Span> parse_timeline(const std::string& text) {
  std::vector<RankMeasurement::Span> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    RankMeasurement::Span s;
    l >> s.start >> s.end >> s.stream;
    std::getline(l >> std::ws, s.op);
    if (!l && !l.eof()) throw std::logic_error("malformed rank timeline: " + line);
    out.push_back(std::move(s));
  }
  return out;
}

RankMeasurement parse_summary(const std::string& line) {
  std::istringstream in(line);
  RankMeasurement rm;
  std::string kinds;
  in >> rm.rank >> rm.stage >> rm.step_time >> rm.executed_wall >> rm.peak_bytes >> rm.exposed_communication >>
      kinds;
  std::getline(in >> std::ws, rm.host);
  if (!in && !in.eof()) throw std::logic_error("malformed rank summary: " + line);
  if (kinds != "-") {
    std::istringstream k(kinds);
    std::string item;
    while (std::getline(k, item, ',')) {
      const std::size_t eq = item.find('=');
      if (eq == std::string::npos) throw std::logic_error("malformed rank summary: " + line);
      rm.exposed_by_kind[static_cast<Collective>(std::stoi(item.substr(0, eq)))] = std::stod(item.substr(eq + 1));
    }
  }
  return rm;
}

}  // namespace

void execute_on_ranks(StepResult& r, const std::vector<RankGraph>& stages, const ParallelSpec& layout, Backend& backend,
                      Communicator& ranks, const DeviceInfo& device, RunOptions o, double timeout_s) {
  if (const std::string why = layout_unexecutable_reason(layout, ranks); !why.empty()) {
    r.not_executed = why;
    return;
  }
  const int stage = stage_of_rank(layout, ranks.rank());
  const auto it = std::find_if(stages.begin(), stages.end(), [&](const RankGraph& s) { return s.stage == stage; });
  if (it == stages.end()) throw std::logic_error(fmt::format("no graph for pipeline stage {}", stage));
  const Graph& g = it->graph;
  // A pipeline of several micro-batches runs each one's passes in its schedule's order.
  const bool scheduled = layout.pp > 1 && (g.workload.grad_accum > 1 || layout.interleave > 1);
  std::string why = scheduled ? micro_batch_unsupported_reason(g, layout) : "";
  if (why.empty()) why = graph_unsupported_reason(backend, g);
  // The graph as built (layers sampled, unscaled) is what the backend allocates.
  const double needs =
      r.layout ? r.layout->ranks.at(static_cast<std::size_t>(stage)).prediction.memory_executed.peak : 0;
  if (why.empty() && device.memory_bytes > 0 && needs > device.memory_bytes)
    why = fmt::format("does not fit: stage {} needs {:.2f} GiB, the device has {:.2f} GiB", stage, needs / gib,
                      device.memory_bytes / gib);
  // Every rank runs the step or none does: one that stays out would leave the others waiting in
  // their first collective. The report gives the first refusing rank's reason.
  float refusals = why.empty() ? 0.0f : 1.0f;
  ranks.all_reduce_sum(&refusals, 1, RankGroup{ranks.size(), 1});
  if (refusals > 0) {
    const std::vector<std::string> reasons = ranks.gather_to_root(why);
    const bool alike = std::all_of(reasons.begin(), reasons.end(), [&](const std::string& x) { return x == reasons[0]; });
    for (std::size_t i = 0; i < reasons.size() && r.not_executed.empty(); ++i)
      if (!reasons[i].empty()) r.not_executed = alike ? reasons[i] : fmt::format("rank {}: {}", i, reasons[i]);
    if (ranks.rank() != 0) r.not_executed = why.empty() ? "another rank cannot run it" : why;
    return;
  }
  // Every rank runs the step the same number of times: the collectives pair up
  // run by run.
  o.min_time = 0;
  if (!o.label.empty()) o.label += fmt::format(" · rank {}", ranks.rank());
  Measurement m;
  Exposed exposed;
  std::string timeline;  // where its ops ran, micro-batches unrolled
  {
    const Watchdog watchdog(timeout_s, fmt::format("rank {} of {} on {}: step '{}' still running after {:g} s (a rank lost, or stuck in a collective?); ending every rank",
                                                   ranks.rank(), ranks.size(), ranks.host(), r.step, timeout_s));
    if (scheduled) {
      const MicroBatchGraph steps = unroll_micro_batches(g, layout, stage);
      m = backend.run(steps.graph, o);
      exposed = exposed_communication(steps.graph, m, device.backend != "cpu");
      timeline = timeline_text(steps.graph, m);
      m = fold_micro_batches(m, steps, g);
    } else {
      m = backend.run(g, o);
      exposed = exposed_communication(g, m, device.backend != "cpu");
      timeline = timeline_text(g, m);
    }
  }
  const std::vector<std::string> lines = ranks.gather_to_root(summary_line(m, ranks, stage, exposed));
  const std::vector<std::string> timelines = ranks.gather_to_root(timeline);
  if (ranks.rank() == 0) {
    for (const std::string& line : lines) r.rank_measured.push_back(parse_summary(line));
    for (std::size_t k = 0; k < timelines.size() && k < r.rank_measured.size(); ++k)
      r.rank_measured[k].timeline = parse_timeline(timelines[k]);
    for (const RankMeasurement& rm : r.rank_measured) {
      m.step_time = std::max(m.step_time, rm.step_time);
      m.executed_wall = std::max(m.executed_wall, rm.executed_wall);
    }
  }
  r.measured = std::move(m);
}

}  // namespace perfsim
