// The stream schedule of a graph on the GPU, derived once from the ops (Op::stream's
// contract, core/graph/graph.hpp): which CUDA stream ("lane") runs each op, which completion
// events an op waits for, what stream 0 joins at the end of the step, and when the walk
// frees each device buffer.
//
//   fork:  before an op on a side lane, that lane waits on an event recorded on lane 0 at
//          that point, so the op starts after everything issued before it on lane 0;
//   join:  an op waits for the completion event of the writer of each input written on
//          another side lane (a lane-0 writer is covered by the fork); stream 0 waits for
//          every side lane before the end of the step;
//   reuse: an op that overwrites a tensor (in place) waits for the earlier side-lane ops that
//          read or wrote it, which the contract leaves implicit but a race would otherwise break.
//
// Buffers are freed on the host in program order (last_use). That is safe under this
// contract: a buffer freed after op i (always a lane-0 op, see below) is reused only by an
// op issued later, which runs after op i on lane 0 or, on a side lane, after the fork that
// follows op i. A tensor whose last use is on a side lane is kept to the end of the step
// (after the final join), as last_use() specifies. The one case the rule does not cover, a
// side-lane op touching a tensor whose last use is a later lane-0 op it is not ordered with,
// gets a wait of lane 0 on that side op right after the last use (`after`). Kernel
// workspaces of side-lane ops are likewise held to the end of the step.
#pragma once
#include <vector>

#include "core/graph/graph.hpp"

namespace perfsim::cuda {

struct StreamPlan {
  std::vector<int> streams;                // distinct Op::stream values; streams[0] == 0
  std::vector<int> lane;                   // by op: index into streams
  std::vector<std::vector<int>> waits;     // by op: earlier ops whose completion it waits for first
  std::vector<std::vector<int>> after;     // by op (lane 0): side ops lane 0 waits for after it
  std::vector<int> lane_last;              // by lane: its last op (-1: none), joined at the end
  std::vector<int> free_after;             // by tensor: op after which it is freed (-1: not by the walk)
  std::vector<char> end_of_step;           // by tensor: device activation freed at the end of the step

  [[nodiscard]] bool multi_stream() const { return streams.size() > 1; }
};

// Throws NotExecutable for a negative Op::stream.
[[nodiscard]] StreamPlan plan_streams(const Graph& g);

}  // namespace perfsim::cuda
