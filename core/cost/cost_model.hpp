// The analytical cost model: roofline per op with per-class efficiency, launch overhead
// (eager or graph replay), host overhead, and a timeline over streams for the total.
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/cost/memory_model.hpp"
#include "core/graph/graph.hpp"

namespace perfsim {

struct OpCost {
  int op = -1;
  double flops = 0;          // per op (not × count)
  double bytes = 0;
  double intensity = 0;      // flops / bytes
  bool compute_bound = false;
  double compute_time = 0;   // flops / (peak(dtype) · compute efficiency)
  double memory_time = 0;    // bytes / (bandwidth · memory efficiency)
  double launch_time = 0;    // eager or graph launch cost
  double time = 0;           // max(compute, memory) + launch, one op (not × count)
  bool supported = true;     // the hardware has the op's dtype
  DType priced_as = DType::fp32;  // precision the compute time was priced at (op dtype or wider)
  bool calibrated = false;   // efficiency from the profile's fitted tables, not a class default
  // Eager steps on a profile that models host dispatch: the host seconds spent issuing this op,
  // and how long the device waited for that issue (already inside `time`).
  double dispatch_time = 0;
  double host_wait = 0;
};

// An op's place on a step's timeline: seconds from the step's start (an op of count n spans
// its n copies).
struct TimelineSpan {
  double start = 0, end = 0;
};

struct Prediction {
  std::string hardware;
  bool calibrated = false;
  // The roofline the ops were priced under: the hardware's dense peaks by dtype (0 = not
  // supported), its memory bandwidth (bytes/s) and capacity (bytes). Reports chart them.
  std::array<double, dtype_count> peak_flops{};
  double memory_bandwidth = 0;
  double memory_capacity = 0;
  std::string profile;                           // "calibrated", "datasheet, uncalibrated", ...
  std::vector<OpCost> ops;                       // one per graph op, same order
  std::map<OpClass, double> time_by_class;       // Σ time × count per class (seconds)
  double host_time = 0;                          // host overhead per step
  double step_time = 0;                          // timeline makespan + host overhead
  std::vector<TimelineSpan> timeline;            // per op: its place on the step's timeline
  // Graphs with collectives: their seconds (Σ time × count) and the part of them the step
  // waits for, the makespan less that of the same timeline with every collective free.
  double communication_time = 0;
  double exposed_communication = 0;
  double flops = 0;                              // whole step
  MemoryBreakdown memory;                        // whole model (scaled)
  MemoryBreakdown memory_executed;               // the graph as built (unscaled)
  bool fits = true;                              // memory.peak <= hardware memory
  std::vector<std::string> unsupported;          // dtypes the hardware lacks, if any
  [[nodiscard]] double tokens_per_second(const Graph& g) const;
  // Model FLOPs (docs/COST_MODEL.md §4): the matrix products the model needs, once each
  // (op_matmul_flops, recomputation left out); for a parallel layout, every GPU's.
  double model_flops = 0;
  // The dense peak (FLOP/s) utilisation is taken over: that of the precision carrying most GEMM
  // FLOPs, as the hardware prices it; 0 when it has none.
  double mfu_peak = 0;
  // Model FLOP utilisation: model FLOPs per second per GPU over mfu_peak.
  double mfu = 0;
  // Hardware FLOP utilisation: the same with the recomputed products counted (the recompute
  // pass's and flash attention's backward); = mfu when nothing is recomputed.
  double hfu = 0;
};

[[nodiscard]] OpCost predict_op(const Op& op, const Graph& g, const Hardware& hw);
[[nodiscard]] Prediction predict(const Graph& g, const Hardware& hw);

// Makespan of the ops over their streams (the rules written on Op::stream), each op also
// waiting for the resource it occupies (SMs, upload or download copy engine, host); durations
// are seconds × count. On one stream this is Σ seconds × count. copy_engines: a GPU moves host
// data with DMA engines beside its kernels; without them (a CPU, whose cores do the copies)
// copies occupy the same resource as kernels and never overlap them.
// issue_seconds (optional, per op): host time to issue the op. The host issues every op in
// program order, so a side-stream op's issue delays stream 0 by that much: moving an op to a
// side stream hides its device time, not its launch.
// Collectives hold their stream but no shared resource: compute overlaps them, running at
// (1 − collective_sm_share) of its speed while one is in flight (NCCL's CTAs hold SMs of their
// own; Hardware::collective_sm_share). Measured op times already carry that slowdown: 0.
[[nodiscard]] double timeline_makespan(const Graph& g, const std::vector<double>& op_seconds,
                                       bool copy_engines = true,
                                       const std::vector<double>& issue_seconds = {},
                                       double collective_sm_share = 0);
// The host's issue of one eager op: `fixed` seconds, then `kernels` launches of `per_kernel`
// seconds each. The device starts each kernel as soon as it is issued, so an op of many
// kernels overlaps its own issue (materialized attention's per-head GEMM calls).
struct HostIssue {
  double fixed = 0;
  double per_kernel = 0;
  int kernels = 1;
  [[nodiscard]] double seconds() const { return fixed + per_kernel * kernels; }
};
// Eager issue (one pass over the graph as built, every count 1): the host issues op i after
// op i-1, kernel by kernel; the op's device time is split evenly over its kernels, each of which
// starts no sooner than `latency` after its issue (the device sees a launch that late) nor
// than the timeline above lets the op start: a kernel queued behind running work hides its
// latency. Returns per op how long it waited for the host beyond that: the time a host-bound
// eager step adds to each op, as per-op events on the device measure it.
[[nodiscard]] std::vector<double> host_paced_waits(const Graph& g,
                                                   const std::vector<double>& device_seconds,
                                                   const std::vector<HostIssue>& issue,
                                                   bool copy_engines = true, double latency = 0);
// The same over predicted costs (OpCost::time, issued in OpCost::launch_time).
[[nodiscard]] double timeline_makespan(const Graph& g, const std::vector<OpCost>& costs,
                                       bool copy_engines = true, double collective_sm_share = 0);

// The timeline itself: when each op starts and ends, and the makespan timeline_makespan
// returns. Traces draw it.
struct Timeline {
  std::vector<TimelineSpan> ops;  // one per graph op, same order
  double makespan = 0;
};
[[nodiscard]] Timeline timeline_spans(const Graph& g, const std::vector<double>& op_seconds,
                                      bool copy_engines = true, const std::vector<double>& issue_seconds = {},
                                      double collective_sm_share = 0);
[[nodiscard]] Timeline timeline_spans(const Graph& g, const std::vector<OpCost>& costs,
                                      bool copy_engines = true, double collective_sm_share = 0);

}  // namespace perfsim
