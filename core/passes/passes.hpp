// Optimizations as graph passes. A stack is a cumulative, ordered list of named steps;
// step i's graph is the baseline with the passes of steps 0..i applied in order.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/graph/graph.hpp"
#include "core/config/model.hpp"

namespace perfsim {

// paged_kv's rows per page when the step gives none (vLLM's default block size), and the most
// it takes.
inline constexpr int64_t default_kv_block = 16;
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

struct OptimizationInfo {
  std::string name;
  std::string summary;        // one line: what it changes in the graph
  bool needs_value = false;   // batch needs a number (paged_kv's is optional)
  bool workload_pass = false; // changes the workload before building (batch, kv_cache)
  bool parallel_pass = false; // changes the parallel layout (dp, tp, pp, cp, ep, sp, zero, interleave)
  // A serving engine's knob (scheduler, max_batch, chunked_prefill, prefix_cache, ...): read by
  // serve{} workloads (core/serve/scheduler.hpp), refused elsewhere; the graph is unchanged.
  bool serve_pass = false;
  const char* text_choices = nullptr;  // the words a text-valued knob takes, "a|b|c"
};

// Every known optimization, for `perfsim list optimizations` and "did you mean".
[[nodiscard]] const std::vector<OptimizationInfo>& optimizations();

// Throws ConfigError for an unknown name (with a suggestion) or a missing/invalid value.
void validate(const PassSpec& p);

// True for a serving knob (OptimizationInfo::serve_pass).
[[nodiscard]] bool is_serve_pass(const PassSpec& p);

// Applies a workload pass (batch, kv_cache); returns false when p is a graph pass.
bool apply_workload_pass(const PassSpec& p, Workload& w);
// Applies a parallel-layout pass (dp, tp, pp, cp, ep, sp, zero, interleave) to `p`; returns
// false for any other pass.
bool apply_parallel_pass(const PassSpec& pass, ParallelSpec& p);
// The layout of step `upto` of `stack`: `base` (the scenario's parallel table) with the
// parallel passes of steps 0..upto applied in order.
[[nodiscard]] ParallelSpec step_parallel(const ParallelSpec& base, const std::vector<StackStep>& stack,
                                         std::size_t upto);

// Applies a graph pass in place (precision, flash_attention, paged_kv, fusion, cuda_graphs,
// fused_optimizer, recompute, pinned_memory, prefetch); no-op for workload passes.
void apply_graph_pass(const PassSpec& p, Graph& g);

// Builds the graph for step `upto` of `stack` (inclusive): workload passes first, then the
// fp32 baseline graph, then graph passes in order. Records step names in Graph::applied.
[[nodiscard]] Graph build_stack_graph(const ModelConfig& m, const Workload& w,
                                      const std::vector<StackStep>& stack, std::size_t upto,
                                      const BuildOptions& o = {});

}  // namespace perfsim
