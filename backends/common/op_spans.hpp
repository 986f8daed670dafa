// Op times from the device's own records of a step (backends/cuda/kernel_trace.hpp): each op's
// first start and last end (ns) on the device, turned into the time the op held its stream.
// An op's time runs from the end of the previous op of its stream to its own end, so the gap
// before its launch belongs to it and the ops of one stream add up to the span of their
// work; an op that waited on another stream (a fork or a join) starts at its own first record,
// so waiting is no op's time. An op with no record (first == no_work) ran nothing: 0.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace perfsim {

struct OpSpan {
  static constexpr uint64_t no_work = std::numeric_limits<uint64_t>::max();
  uint64_t first = no_work, last = 0;  // ns
  int stream = 0;                      // the op's lane (0: the step's own stream)
  bool waits_elsewhere = false;        // its start waits on another stream
};

// Seconds per op, in the ops' order (the order they were issued in).
[[nodiscard]] inline std::vector<double> op_times_from_spans(const std::vector<OpSpan>& ops) {
  std::vector<double> out;
  out.reserve(ops.size());
  std::vector<uint64_t> stream_end;  // by stream: end of its last op so far (0: none yet)
  for (const OpSpan& op : ops) {
    if (op.first == OpSpan::no_work) {
      out.push_back(0.0);
      continue;
    }
    const auto s = static_cast<std::size_t>(op.stream);
    if (stream_end.size() <= s) stream_end.resize(s + 1, 0);
    uint64_t from = op.first;
    if (!op.waits_elsewhere && stream_end[s] != 0 && stream_end[s] <= op.first) from = stream_end[s];
    out.push_back(static_cast<double>(op.last - from) * 1e-9);
    stream_end[s] = op.last;
  }
  return out;
}

}  // namespace perfsim
