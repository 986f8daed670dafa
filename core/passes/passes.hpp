// Optimizations as graph passes. A stack is a cumulative, ordered list of named steps;
// step i's graph is the baseline with the passes of steps 0..i applied in order.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/graph/graph.hpp"
#include "core/config/model.hpp"

namespace perfsim {

// paged_kv's rows per page when the step gives none (vLLM's default block size), and the most
// it takes.
inline constexpr int64_t default_kv_block = 16;
// Inputs per scale group of int4 weights (int4_weights), AWQ's and GPTQ's usual 128.
inline constexpr int64_t default_quant_group = 128;
inline constexpr int64_t max_kv_block = 4096;

// One pass by name, with an optional value (batch = 32, kv_cache = 0, paged_kv = 32) or, for
// the serving knobs that take a word, a text (scheduler = "static").
struct PassSpec {
  PassSpec() = default;
  PassSpec(std::string n, std::optional<double> v = std::nullopt, std::optional<std::string> t = std::nullopt)
      : name(std::move(n)), value(v), text(std::move(t)) {}
  std::string name;
  std::optional<double> value;
  std::optional<std::string> text;
};

// A named step of a stack ("+flash_attention"); its passes are applied on top of all earlier steps.
struct StackStep {
  std::string name;
  std::vector<PassSpec> passes;
  // "file:line: " of the step() call in the scenario ("" when unknown): errors raised while
  // its passes rewrite the graph start with it.
  std::string where;
};

// What an optimization changes, each kind applied at its own point of building a step.
enum class OptimizationKind {
  graph,     // rewrites the built graph (precision, flash_attention, fusion, ...)
  workload,  // changes the workload before building (batch, kv_cache)
  parallel,  // changes the parallel layout (dp, tp, pp, cp, ep, sp, zero, interleave)
  // A serving engine's knob (scheduler, max_batch, chunked_prefill, prefix_cache, ...): read by
  // serve{} workloads (core/serve/scheduler_config.hpp), refused elsewhere; the graph is unchanged.
  serve,
};

// Whether an optimization takes a value: `none` still accepts 1 ("on").
enum class PassValue { none, optional, required };

// The numbers a pass's value may be, and how an error states them.
struct ValueRange {
  double low = 1, high = 1;
  bool low_open = false, high_open = false;  // the bound itself is excluded
  bool whole = true;
  std::string text;  // "takes a whole number from 1 to 3": the error's words for the range

  [[nodiscard]] bool contains(double v) const;
};

// What a pass does, by kind. A serving knob has none here: core/serve reads it.
using GraphPassFn = void (*)(const PassSpec&, Graph&);
using WorkloadPassFn = void (*)(const PassSpec&, Workload&);
using ParallelPassFn = void (*)(const PassSpec&, ParallelSpec&);
using PassApply = std::variant<std::monostate, GraphPassFn, WorkloadPassFn, ParallelPassFn>;

// One optimization: everything validate() and the apply_* functions need to know of it.
struct OptimizationInfo {
  std::string name;
  std::string summary;  // one line: what it changes in the graph
  OptimizationKind kind = OptimizationKind::graph;
  PassValue value = PassValue::none;  // batch needs a number; paged_kv's is optional
  ValueRange range;                   // the numbers it takes, unless `value` is none
  std::string example;                // "{tp = 2}": shown when a required value is missing
  std::vector<std::string> choices;   // the words a text-valued knob takes (scheduler = "static")
  PassApply apply;                    // the apply function of its kind (none for a serving knob)
};

// Every known optimization, for `perfsim list optimizations` and "did you mean"
// (core/passes/optimizations.cpp).
[[nodiscard]] const std::vector<OptimizationInfo>& optimizations();

// The optimization called `name`; nullptr when there is none.
[[nodiscard]] const OptimizationInfo* find_optimization(std::string_view name);

// True when `p` names a known optimization of kind `k`.
[[nodiscard]] bool is_kind(const PassSpec& p, OptimizationKind k);

// Throws ConfigError for an unknown name (with a suggestion) or a missing/invalid value.
void validate(const PassSpec& p);

// Validates `p`; applies it to `w` when it is a workload pass and returns true, false for any
// other kind.
bool apply_workload_pass(const PassSpec& p, Workload& w);
// Applies a parallel-layout pass to `p` (validating it) and returns true; returns false for any
// other pass.
bool apply_parallel_pass(const PassSpec& pass, ParallelSpec& p);
// The layout of step `upto` of `stack`: `base` (the scenario's parallel table) with the
// parallel passes of steps 0..upto applied in order.
[[nodiscard]] ParallelSpec step_parallel(const ParallelSpec& base, const std::vector<StackStep>& stack,
                                         std::size_t upto);

// Validates `p`; applies it to `g` in place when it is a graph pass; any other kind leaves the
// graph as it is.
void apply_graph_pass(const PassSpec& p, Graph& g);

// Builds the graph for step `upto` of `stack` (inclusive): workload passes first, then the
// fp32 baseline graph, then graph passes in order. Records step names in Graph::applied.
[[nodiscard]] Graph build_stack_graph(const ModelConfig& m, const Workload& w,
                                      const std::vector<StackStep>& stack, std::size_t upto,
                                      const BuildOptions& o = {});

}  // namespace perfsim
