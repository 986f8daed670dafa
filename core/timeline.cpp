// The step timeline: ops placed on their streams in program order (the semantics written on
// Op::stream), each also waiting for the shared resource it occupies; the makespan is the
// step time. Predictions feed it priced ops, measurements the measured per-op medians.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include "core/cost_model.hpp"
#include "core/op_metrics.hpp"

namespace perfsim {

namespace {

// What an op occupies while it runs. Two ops on one resource never overlap, whatever their
// streams: kernels share the SMs (conservative: two small kernels could in fact run side by
// side), and each direction of the host link has one copy engine.
enum class Resource { sms, upload_engine, download_engine, host };
constexpr std::size_t resource_count = 4;

Resource resource_of(const Op& op, const Graph& g, bool copy_engines) {
  if (op.kind == OpKind::host) return Resource::host;
  if (op.kind != OpKind::copy || !copy_engines) return Resource::sms;
  switch (copy_direction(op, g)) {
    case CopyDirection::upload: return Resource::upload_engine;
    case CopyDirection::download: return Resource::download_engine;
    case CopyDirection::host_to_host: return Resource::host;
    case CopyDirection::device_to_device: break;
  }
  return Resource::sms;  // a device-to-device copy is a kernel
}

}  // namespace

double timeline_makespan(const Graph& g, const std::vector<double>& op_seconds,
                         bool copy_engines, const std::vector<double>& issue_seconds) {
  if (op_seconds.size() != g.ops.size() ||
      (!issue_seconds.empty() && issue_seconds.size() != g.ops.size()))
    throw std::logic_error(
        fmt::format("timeline: {} op times ({} issue times) for {} ops", op_seconds.size(),
                    issue_seconds.size(), g.ops.size()));
  // When each tensor's latest write finishes (persistent tensors are ready at 0).
  std::vector<double> written_at(g.tensors.size(), 0.0);
  std::vector<double> stream_free(1, 0.0);
  std::array<double, resource_count> resource_free{};
  auto tensor_index = [&](const Op& op, int id) {
    if (id < 0 || static_cast<std::size_t>(id) >= written_at.size())
      throw std::logic_error(fmt::format("timeline: op '{}' uses unknown tensor {}", op.name, id));
    return static_cast<std::size_t>(id);
  };
  double makespan = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.stream < 0)
      throw std::logic_error(fmt::format("timeline: op '{}' has stream {}", op.name, op.stream));
    const auto s = static_cast<std::size_t>(op.stream);
    if (s >= stream_free.size()) stream_free.resize(s + 1, 0.0);
    // List scheduling in program order: an op starts once its stream is idle and every
    // producer of its inputs has finished (CUDA streams plus events: the join).
    double start = stream_free[s];
    for (int id : op.inputs) start = std::max(start, written_at[tensor_index(op, id)]);
    // The fork: a side stream branches off the program where the op is issued, after every
    // stream-0 op issued before it. Stream 0 runs in order, so that is when it is next free.
    if (s > 0) start = std::max(start, stream_free[0]);
    const auto r = static_cast<std::size_t>(resource_of(op, g, copy_engines));
    start = std::max(start, resource_free[r]);
    // A sampled op stands for `count` identical ops run back to back.
    const double finish = start + op_seconds[i] * op.count;
    stream_free[s] = finish;
    resource_free[r] = finish;
    for (int id : op.outputs) written_at[tensor_index(op, id)] = finish;
    makespan = std::max(makespan, finish);
    // The host issued it between stream-0 ops: the main program waits for that launch.
    if (s > 0 && !issue_seconds.empty()) {
      stream_free[0] += issue_seconds[i] * op.count;
      makespan = std::max(makespan, stream_free[0]);
    }
  }
  return makespan;
}

double timeline_makespan(const Graph& g, const std::vector<OpCost>& costs, bool copy_engines) {
  if (costs.size() != g.ops.size())
    throw std::logic_error(
        fmt::format("timeline: {} costs for {} ops", costs.size(), g.ops.size()));
  std::vector<double> seconds, issue;
  seconds.reserve(costs.size());
  issue.reserve(costs.size());
  for (const OpCost& c : costs) {
    seconds.push_back(c.time);
    issue.push_back(c.launch_time);
  }
  return timeline_makespan(g, seconds, copy_engines, issue);
}

}  // namespace perfsim
