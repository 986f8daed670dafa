// The step timeline: ops placed on their streams in program order (the semantics written on
// Op::stream), each also waiting for the shared resource it occupies; the makespan is the
// step time. Predictions feed it priced ops, measurements the measured per-op medians.
// Collectives hold their stream only: NCCL moves data with CTAs of its own beside the compute
// kernels, which run slower meanwhile by the SMs those CTAs take (collective_sm_share).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/graph/op_metrics.hpp"

namespace perfsim {

namespace {

// What an op occupies while it runs. Two ops on one resource never overlap, whatever their
// streams: kernels share the SMs (conservative: two small kernels could in fact run side by
// side), and each direction of the host link has one copy engine.
enum class Resource { sms, upload_engine, download_engine, host, none };
constexpr std::size_t resource_count = 5;

Resource resource_of(const Op& op, const Graph& g, bool copy_engines) {
  if (op.kind == OpKind::host) return Resource::host;
  if (op.kind == OpKind::collective) return Resource::none;  // its stream orders it
  if (op.kind != OpKind::copy || !copy_engines) return Resource::sms;
  switch (copy_direction(op, g)) {
    case CopyDirection::upload: return Resource::upload_engine;
    case CopyDirection::download: return Resource::download_engine;
    case CopyDirection::host_to_host: return Resource::host;
    case CopyDirection::device_to_device: break;
  }
  return Resource::sms;  // a device-to-device copy is a kernel
}

// Program-order list scheduling over streams and resources (the rules written on
// Op::stream): place() puts one op after everything it must follow.
class Placer {
 public:
  Placer(const Graph& g, bool copy_engines, double collective_sm_share = 0)
      : m_g(g), m_copy_engines(copy_engines), m_share(std::clamp(collective_sm_share, 0.0, 0.9)),
        m_written_at(g.tensors.size(), 0.0), m_stream_free(1, 0.0) {}

  // When op i could start, ignoring the host: its stream is idle, its inputs are written,
  // its resource is free (and, on a side stream, stream 0 has reached the fork).
  [[nodiscard]] double ready(std::size_t i) {
    const Op& op = m_g.ops[i];
    if (op.stream < 0)
      throw std::logic_error(fmt::format("timeline: op '{}' has stream {}", op.name, op.stream));
    const auto s = static_cast<std::size_t>(op.stream);
    if (s >= m_stream_free.size()) m_stream_free.resize(s + 1, 0.0);
    // List scheduling in program order: an op starts once its stream is idle and every
    // producer of its inputs has finished (CUDA streams plus events: the join).
    double start = m_stream_free[s];
    for (int id : op.inputs) start = std::max(start, m_written_at[tensor_index(op, id)]);
    // The fork: a side stream branches off the program where the op is issued, after every
    // stream-0 op issued before it. Stream 0 runs in order, so that is when it is next free.
    if (s > 0) start = std::max(start, m_stream_free[0]);
    const std::size_t r = resource(i);
    return r == static_cast<std::size_t>(Resource::none) ? start : std::max(start, m_resource_free[r]);
  }

  // Runs op i from `start` for `duration` seconds (of the op alone on the device); returns
  // its finish.
  double run(std::size_t i, double start, double duration) {
    const Op& op = m_g.ops[i];
    const bool on_sms = resource(i) == static_cast<std::size_t>(Resource::sms);
    const double finish = on_sms ? slowed_finish(start, duration) : start + duration;
    if (op.kind == OpKind::collective && duration > 0) m_collectives.push_back({start, finish});
    m_stream_free[static_cast<std::size_t>(op.stream)] = finish;
    m_resource_free[resource(i)] = finish;
    for (int id : op.outputs) m_written_at[tensor_index(op, id)] = finish;
    m_makespan = std::max(m_makespan, finish);
    return finish;
  }

  // The host issued a side-stream op between stream-0 ops: the main program waits for it.
  void delay_main_stream(double seconds) {
    m_stream_free[0] += seconds;
    m_makespan = std::max(m_makespan, m_stream_free[0]);
  }

  [[nodiscard]] double makespan() const { return m_makespan; }

 private:
  struct Interval {
    double start, end;
  };

  // When a kernel of `duration` seconds started at `start` finishes, running at (1 − share) of
  // its speed while any collective placed so far is in flight. Collectives issued after it
  // cannot overlap it: a side stream forks after stream 0's latest op.
  [[nodiscard]] double slowed_finish(double start, double duration) const {
    if (m_share <= 0 || m_collectives.empty()) return start + duration;
    std::vector<Interval> busy;
    for (const Interval& c : m_collectives)
      if (c.end > start) busy.push_back(c);
    std::sort(busy.begin(), busy.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    std::vector<Interval> merged;  // when at least one collective is in flight
    for (const Interval& b : busy) {
      if (!merged.empty() && b.start <= merged.back().end) merged.back().end = std::max(merged.back().end, b.end);
      else merged.push_back(b);
    }
    const double rate = 1.0 - m_share;
    double t = start, left = duration;
    for (const Interval& m : merged) {
      const double from = std::max(t, m.start);
      if (from > t) {  // full speed until the collective starts
        if (left <= from - t) return t + left;
        left -= from - t;
        t = from;
      }
      if (left <= (m.end - t) * rate) return t + left / rate;
      left -= (m.end - t) * rate;
      t = m.end;
    }
    return t + left;
  }

  std::size_t resource(std::size_t i) const {
    return static_cast<std::size_t>(resource_of(m_g.ops[i], m_g, m_copy_engines));
  }
  std::size_t tensor_index(const Op& op, int id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= m_written_at.size())
      throw std::logic_error(fmt::format("timeline: op '{}' uses unknown tensor {}", op.name, id));
    return static_cast<std::size_t>(id);
  }

  const Graph& m_g;
  bool m_copy_engines;
  double m_share;                      // fraction of the SMs a running collective holds
  std::vector<Interval> m_collectives; // when each placed collective ran
  std::vector<double> m_written_at;  // when each tensor's latest write finishes (persistent: 0)
  std::vector<double> m_stream_free;
  std::array<double, resource_count> m_resource_free{};
  double m_makespan = 0;
};

void check_sizes(const Graph& g, std::size_t seconds, std::size_t issue) {
  if (seconds != g.ops.size() || (issue != 0 && issue != g.ops.size()))
    throw std::logic_error(fmt::format("timeline: {} op times ({} issue times) for {} ops", seconds,
                                       issue, g.ops.size()));
}

}  // namespace

Timeline timeline_spans(const Graph& g, const std::vector<double>& op_seconds, bool copy_engines,
                        const std::vector<double>& issue_seconds, double collective_sm_share) {
  check_sizes(g, op_seconds.size(), issue_seconds.size());
  Placer placer(g, copy_engines, collective_sm_share);
  Timeline t;
  t.ops.reserve(g.ops.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    // A sampled op stands for `count` identical ops run back to back.
    const double start = placer.ready(i);
    t.ops.push_back({start, placer.run(i, start, op_seconds[i] * op.count)});
    if (op.stream > 0 && !issue_seconds.empty()) placer.delay_main_stream(issue_seconds[i] * op.count);
  }
  t.makespan = placer.makespan();
  return t;
}

double timeline_makespan(const Graph& g, const std::vector<double>& op_seconds,
                         bool copy_engines, const std::vector<double>& issue_seconds,
                         double collective_sm_share) {
  return timeline_spans(g, op_seconds, copy_engines, issue_seconds, collective_sm_share).makespan;
}

std::vector<double> host_paced_waits(const Graph& g, const std::vector<double>& device_seconds,
                                     const std::vector<HostIssue>& issue, bool copy_engines, double latency) {
  check_sizes(g, device_seconds.size(), issue.size());
  Placer placer(g, copy_engines);
  std::vector<double> waits(g.ops.size(), 0.0);
  double issued = 0;  // host clock: when the host has finished issuing op i
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const HostIssue& h = issue[i];
    const int kernels = std::max(1, h.kernels);
    const double ready = placer.ready(i);
    const double piece = device_seconds[i] / kernels;
    const double first = issued + h.fixed;  // the host starts launching the op's kernels
    double finish = ready;
    for (int k = 1; k <= kernels; ++k) {
      finish = std::max(finish, first + k * h.per_kernel + latency) + piece;
    }
    issued = first + kernels * h.per_kernel;
    // The op occupies its stream as if it had started this late and run its device time.
    const double start = finish - device_seconds[i];
    waits[i] = start - ready;
    placer.run(i, start, device_seconds[i]);
  }
  return waits;
}

Timeline timeline_spans(const Graph& g, const std::vector<OpCost>& costs, bool copy_engines,
                        double collective_sm_share) {
  if (costs.size() != g.ops.size())
    throw std::logic_error(
        fmt::format("timeline: {} costs for {} ops", costs.size(), g.ops.size()));
  std::vector<double> seconds, issue;
  seconds.reserve(costs.size());
  issue.reserve(costs.size());
  for (const OpCost& c : costs) {
    seconds.push_back(c.time);
    // Ops paced by a modelled host dispatch hold their issue in host_wait already.
    issue.push_back(c.dispatch_time > 0 ? 0.0 : c.launch_time);
  }
  return timeline_spans(g, seconds, copy_engines, issue, collective_sm_share);
}

double timeline_makespan(const Graph& g, const std::vector<OpCost>& costs, bool copy_engines,
                         double collective_sm_share) {
  return timeline_spans(g, costs, copy_engines, collective_sm_share).makespan;
}

}  // namespace perfsim
