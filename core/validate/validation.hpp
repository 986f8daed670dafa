// Validation statistics: how far predictions fall from measurements over a suite of runs
// (`perfsim validate`). Pure functions of RunResults; docs/VALIDATION.md defines every figure.
#pragma once
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/graph/op_kind.hpp"
#include "core/run/results.hpp"
#include "core/statistics.hpp"

namespace perfsim {


// Statistics of the magnitudes |e| of a list of relative errors.
struct ErrorStats {
  std::size_t count = 0;
  double median = 0;   // median |e|
  double p90 = 0;      // nearest-rank 90th percentile of |e|
  double max = 0;      // largest |e|
};
[[nodiscard]] ErrorStats abs_error_stats(const std::vector<double>& errors);

// The statistics of `.error` over the items whose key_of(item) equals `key`, with the item of
// the largest |error|; nothing when no item has that key.
template <class Item, class Key, class KeyOf>
[[nodiscard]] std::optional<std::pair<ErrorStats, Item>> error_group(const std::vector<Item>& items, Key key,
                                                                     KeyOf key_of) {
  std::vector<double> errors;
  const Item* worst = nullptr;
  for (const Item& item : items) {
    if (!(key_of(item) == key)) continue;
    errors.push_back(item.error);
    if (worst == nullptr || std::fabs(item.error) > std::fabs(worst->error)) worst = &item;
  }
  if (worst == nullptr) return std::nullopt;
  return std::make_pair(abs_error_stats(errors), *worst);
}

// One executed op: predicted OpCost::time against the measured median (one op, not × count).
struct OpError {
  std::string scenario;   // run label (scenario name, plus the sweep point when there is one)
  std::string step;
  std::string op;         // op name in the graph
  OpKind kind = OpKind::gemm;
  OpClass op_class = OpClass::gemm;
  double predicted = 0;   // seconds
  double measured = 0;    // seconds: the op's device time (OpMeasurement::device) where the
                          // backend timed it with the stream held, else its in-step median
  double measured_in_step = 0;  // seconds: OpMeasurement::median (with any wait for the host)
  double error = 0;       // (predicted − measured) / measured
  // Eager ops on a profile that models host dispatch: the host seconds predicted and
  // measured (OpMeasurement::host) for issuing the op; 0 where either is missing.
  double predicted_dispatch = 0;
  double measured_host = 0;
};

// Per-op errors of the ops whose measured time falls in [low, high): small ops are bound by
// launch and latency, large ones by the roofline, and their errors differ by as much.
struct DurationBand {
  double low = 0, high = 0;   // seconds
  std::string label;          // "under 10 µs", "10–100 µs", "100 µs and more"
};
// The bands the report uses, in order.
[[nodiscard]] const std::vector<DurationBand>& duration_bands();

struct DurationValidation {
  DurationBand band;
  ErrorStats stats;
  OpError worst;
};

struct ClassValidation {
  OpClass op_class = OpClass::gemm;
  ErrorStats stats;
  OpError worst;          // the op with the largest |error| of the class
};

// One stack step of one run: step time (full model) and peak memory of the graph as built.
struct StepValidation {
  std::string scenario, step;
  double predicted_time = 0;             // Prediction::step_time
  std::optional<double> measured_time;   // Measurement::step_time
  std::optional<double> time_error;      // (predicted − measured) / measured
  double predicted_peak = 0;             // Prediction::memory_executed.peak, bytes
  std::optional<double> measured_peak;   // Measurement::peak_bytes
  std::optional<double> memory_error;
  int timed_runs = 0;                    // Measurement::repeats: the runs its medians are over
  std::string op_timing;                 // Measurement::op_timing ("": not said)
  // Eager steps priced with host dispatch and timed on the host (CUDA): seconds the host spent
  // issuing the step's ops (full model, Σ × count), predicted (OpCost::dispatch_time) and
  // measured (OpMeasurement::host). Their ratio is how fast this machine's host issued ops
  // against the profile's: eager, host-bound step times follow it.
  std::optional<double> predicted_issue, measured_issue, issue_error;
  std::string note;                      // why the step was not measured
};

// One optimization: a step against the step before it in the same stack.
struct SpeedupValidation {
  std::string scenario, step, previous;
  double predicted = 0;   // throughput ratio step / previous, both predicted
  double measured = 0;    // the same, both measured
  double error = 0;       // (predicted − measured) / measured
};

// One collective at one group size and buffer size: predicted (collective_time, without the
// launch: the calls ran back to back) against measured.
struct CollectiveError {
  Collective collective = Collective::all_reduce;
  int group = 2;
  double payload = 0;     // bytes (the nccl-tests size)
  double predicted = 0;   // seconds
  double measured = 0;    // seconds
  double error = 0;       // (predicted − measured) / measured
  // A collective a step ran on ranks (add_step_collective_errors): "scenario/step op"; empty for
  // one timed back to back.
  std::string op;
};

struct CollectiveValidation {
  Collective collective = Collective::all_reduce;
  ErrorStats stats;       // over its group sizes and buffer sizes
  CollectiveError worst;
};

struct ValidationSummary {
  std::vector<OpError> ops;                 // every executed op with a positive measured median
  std::vector<ClassValidation> classes;     // in all_op_classes order, classes with ops only
  std::vector<DurationValidation> durations;  // in duration_bands() order, bands with ops only
  ErrorStats all_ops;                       // over every op of `ops`
  ErrorStats step_time, memory, speedup;    // over the measured steps' errors and `speedups`
  std::vector<StepValidation> steps;        // every step of every run, in order
  std::vector<SpeedupValidation> speedups;  // steps after the first whose pair was measured
  std::size_t unmeasured_steps = 0;         // steps without a measurement
  std::size_t held_ops = 0;                 // ops of `ops` compared by their held device time
  // Collectives (collectives.hpp add_collective_errors): empty with a reason in
  // collectives_skipped when the backend spans one GPU.
  std::vector<CollectiveError> collective_errors;
  std::vector<CollectiveValidation> collectives;   // in all_collectives order, timed ones only
  ErrorStats all_collectives;
  std::string collectives_skipped;
  bool collectives_in_steps = false;  // the collectives are the steps' own, run on ranks
};

// Scenario label of a run: its name, and "[batch=8]" when it is a sweep point.
[[nodiscard]] std::string run_label(const RunResult& r);

[[nodiscard]] ValidationSummary summarize_validation(const std::vector<RunResult>& runs);
// How the measured steps' ops were timed (StepValidation::op_timing), each way once, in order.
[[nodiscard]] std::vector<std::string> op_timings(const ValidationSummary& s);

// A figure `--max-error` checks: each measured step's time error and peak-memory error, each
// op class's median |per-op error|, each optimization's speedup error, each collective's
// median |error|.
struct CheckedFigure {
  std::string where;      // "decode/+fp8", "op class gemm" for per-op medians, "all_reduce"
  std::string what;       // "step time", "peak memory", "per-op median", "speedup", "collective median"
  double error = 0;       // signed relative error (medians: the median |error|)

  [[nodiscard]] bool is_median() const { return what == "per-op median" || what == "collective median"; }
};
[[nodiscard]] std::vector<CheckedFigure> checked_figures(const ValidationSummary& s);
// The figures whose |error| exceeds `max_error` (a fraction: 0.1 = 10%), largest |error|
// first.
[[nodiscard]] std::vector<CheckedFigure> figures_over(const ValidationSummary& s, double max_error);

// The worst (largest |error|) of each family, empty when the family has no figure.
[[nodiscard]] std::optional<StepValidation> worst_step_time(const ValidationSummary& s);
[[nodiscard]] std::optional<StepValidation> worst_memory(const ValidationSummary& s);
[[nodiscard]] std::optional<SpeedupValidation> worst_speedup(const ValidationSummary& s);
[[nodiscard]] std::optional<OpError> worst_op(const ValidationSummary& s);
[[nodiscard]] std::optional<CollectiveError> worst_collective(const ValidationSummary& s);

}  // namespace perfsim
