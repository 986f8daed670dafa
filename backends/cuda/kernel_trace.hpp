// Device-side timestamps of the kernels, copies and memsets a CUDA graph replay runs, from
// CUPTI activity records (the profiler interface of the CUDA toolkit). Timing a replayed step
// op by op with event-record nodes costs each op a few µs of its own interval, by an amount
// that changes with its place in the graph (docs/PERFORMANCE.md, "Per-op times in a graph
// replay"); these records time the event-free graph itself, to the nanosecond.
//
// CUPTI is process-wide and takes one subscriber: KernelTrace::get() subscribes on first use
// and returns nullptr (why() says why) when CUPTI is missing from the build or refuses, for
// example under a profiler that holds the subscription; callers then time with events.
// PERFSIM_OP_TIMING chooses for a run: "events" times every op with events, "cupti-graphs"
// takes CUPTI's records for graph replays only (held eager passes keep their events); unset
// or "cupti", records for both.
// Records name the node of the instantiated graph that ran them; the trace follows
// instantiation's node clones back to the captured graph's nodes, so get() must come before
// the graph is instantiated. Work launched eagerly is named by a tag: TagScope pushes one
// around the calls that launch an op's work, and its records carry it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace perfsim::cuda {

struct TraceRecord {
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t node = 0;  // id of the captured graph's node that ran it (0: not from a graph)
  uint64_t tag = 0;   // the TagScope around its launch (0: none)
};

class KernelTrace {
 public:
  // The process's trace, or nullptr when CUPTI cannot be used here.
  [[nodiscard]] static KernelTrace* get();
  // Why get() returned nullptr ("" when it did not).
  [[nodiscard]] static const std::string& why();
  // Whether held eager passes are timed from the records too (PERFSIM_OP_TIMING).
  [[nodiscard]] static bool times_eager();

  // The id records carry for a node of a captured graph.
  [[nodiscard]] static uint64_t node_id(cudaGraphNode_t node);

  // Records from begin() to end(): kernels, copies and memsets, whatever launched them.
  void begin();
  [[nodiscard]] std::vector<TraceRecord> end();

  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

 private:
  friend class TagScope;
  KernelTrace() = default;
  void push_tag(uint64_t tag);
  void pop_tag();
};

// Tags the work launched by this thread while it lives (tag > 0); with a null trace, nothing.
class TagScope {
 public:
  TagScope(KernelTrace* trace, uint64_t tag) : m_trace(trace) {
    if (m_trace != nullptr) m_trace->push_tag(tag);
  }
  ~TagScope() {
    if (m_trace != nullptr) m_trace->pop_tag();
  }
  TagScope(const TagScope&) = delete;
  TagScope& operator=(const TagScope&) = delete;

 private:
  KernelTrace* m_trace;
};

}  // namespace perfsim::cuda
