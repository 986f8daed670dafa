// Device-side timestamps of the kernels, copies and memsets a CUDA graph replay runs, from
// CUPTI activity records (the profiler interface of the CUDA toolkit). Timing a replayed step
// op by op with event-record nodes costs each op a few µs of its own interval, by an amount
// that changes with its place in the graph (docs/PERFORMANCE.md, runs 80–89); these records
// time the event-free graph itself, to the nanosecond.
//
// Opt-in: PERFSIM_OP_TIMING=cupti asks for it (requested()); unset or "events" keeps the event
// nodes, which the shipped profiles were fitted with. CUPTI is process-wide and takes one
// subscriber: get() subscribes on first use and returns nullptr (why() says why) when CUPTI is
// missing from the build or refuses, for example under a profiler that holds the
// subscription; callers then time with events. Records name the node of the instantiated
// graph that ran them; the trace follows instantiation's node clones back to the captured
// graph's nodes, so get() must come before the graph is instantiated.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace perfsim::cuda {

struct TraceRecord {
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t node = 0;  // id of the captured graph's node that ran it (0: not from a graph)
};

class KernelTrace {
 public:
  // Whether PERFSIM_OP_TIMING asks for CUPTI's records ("cupti"); throws on a value that is
  // neither "cupti" nor "events".
  [[nodiscard]] static bool requested();
  // The process's trace, or nullptr when CUPTI cannot be used here.
  [[nodiscard]] static KernelTrace* get();
  // Why get() returned nullptr ("" when it did not).
  [[nodiscard]] static const std::string& why();

  // The id records carry for a node of a captured graph.
  [[nodiscard]] static uint64_t node_id(cudaGraphNode_t node);

  // Records from begin() to end(): kernels, copies and memsets, whatever launched them.
  void begin();
  [[nodiscard]] std::vector<TraceRecord> end();

  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

 private:
  KernelTrace() = default;
};

}  // namespace perfsim::cuda
