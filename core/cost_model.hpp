// The analytical cost model: roofline per op with per-class efficiency, launch overhead
// (eager or graph replay), host overhead, and a timeline over streams for the total.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/graph.hpp"
#include "core/hardware.hpp"
#include "core/memory_model.hpp"

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
};

struct Prediction {
  std::string hardware;
  bool calibrated = false;
  std::string profile;                           // "calibrated", "datasheet, uncalibrated", ...
  std::vector<OpCost> ops;                       // one per graph op, same order
  std::map<OpClass, double> time_by_class;       // Σ time × count per class (seconds)
  double host_time = 0;                          // host overhead per step
  double step_time = 0;                          // timeline makespan + host overhead
  double flops = 0;                              // whole step
  MemoryBreakdown memory;                        // whole model (scaled)
  MemoryBreakdown memory_executed;               // the graph as built (unscaled)
  bool fits = true;                              // memory.peak <= hardware memory
  std::vector<std::string> unsupported;          // dtypes the hardware lacks, if any
  [[nodiscard]] double tokens_per_second(const Graph& g) const;
  // Model FLOP utilisation: flops / (step_time · peak of the graph's main dtype).
  double mfu = 0;
};

[[nodiscard]] OpCost predict_op(const Op& op, const Graph& g, const Hardware& hw);
[[nodiscard]] Prediction predict(const Graph& g, const Hardware& hw);

// Makespan of the ops over their streams, each op starting after its stream is free and its
// inputs are written; durations are time × count.
[[nodiscard]] double timeline_makespan(const Graph& g, const std::vector<OpCost>& costs);

}  // namespace perfsim
