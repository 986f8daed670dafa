// Validation of pass specs and applying them through the optimization table
// (optimizations.cpp), and building a stack step's graph: workload passes, then the fp32
// baseline, then graph passes in stack order.
#include "core/passes/passes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/text.hpp"

namespace perfsim {

bool ValueRange::contains(double v) const {
  const bool above = low_open ? v > low : v >= low;
  const bool below = high_open ? v < high : v <= high;
  return above && below && (!whole || v == std::floor(v));
}

const OptimizationInfo* find_optimization(std::string_view name) {
  for (const auto& o : optimizations())
    if (o.name == name) return &o;
  return nullptr;
}

bool is_kind(const PassSpec& p, OptimizationKind k) {
  const OptimizationInfo* info = find_optimization(p.name);
  return info != nullptr && info->kind == k;
}

namespace {

// A knob that takes a word: one of its choices.
void validate_choice(const PassSpec& p, const OptimizationInfo& info) {
  const std::vector<std::string>& choices = info.choices;
  if (!p.text || std::find(choices.begin(), choices.end(), *p.text) == choices.end())
    throw ConfigError(fmt::format("optimization '{}' takes one of {} (e.g. {{{} = \"{}\"}}){}", p.name,
                                  fmt::join(choices, ", "), p.name, choices.front(),
                                  p.text ? fmt::format("; got '{}'{}", *p.text, did_you_mean(*p.text, choices))
                                         : std::string()));
}

}  // namespace

void validate(const PassSpec& p) {
  const OptimizationInfo* info = find_optimization(p.name);
  if (!info) {
    std::vector<std::string> names;
    for (const auto& o : optimizations()) names.push_back(o.name);
    throw ConfigError(fmt::format("unknown optimization '{}'{}", p.name, did_you_mean(p.name, names)));
  }
  if (!info->choices.empty()) {
    // A word that may be left out (recompute): named alone, or as true, it takes its first.
    if (!p.text && info->value != PassValue::required && (!p.value || *p.value == 1)) return;
    validate_choice(p, *info);
    return;
  }
  const bool knob = info->kind == OptimizationKind::serve;
  if (p.text) {
    if (knob) throw ConfigError(fmt::format("optimization '{}' takes a number, not the word '{}'", p.name, *p.text));
    throw ConfigError(fmt::format("optimization '{}' takes {} (got the word '{}')", p.name,
                                  info->value == PassValue::required ? "a number" : "no value", *p.text));
  }
  if (info->value == PassValue::none) {
    if (p.value && *p.value != 1)
      throw ConfigError(fmt::format("optimization '{}' takes no value (got {}); leave it out{} to disable it", p.name,
                                    *p.value, knob ? "" : " of the step"));
    return;
  }
  if (!p.value) {
    if (info->value == PassValue::required)
      throw ConfigError(fmt::format("optimization '{}' needs a value (e.g. {})", p.name, info->example));
    return;
  }
  if (!info->range.contains(*p.value))
    throw ConfigError(fmt::format("optimization '{}' {} (got {})", p.name, info->range.text, *p.value));
}

bool apply_workload_pass(const PassSpec& p, Workload& w) {
  validate(p);
  const auto* apply = std::get_if<WorkloadPassFn>(&find_optimization(p.name)->apply);
  if (apply == nullptr) return false;
  (*apply)(p, w);
  return true;
}

bool apply_parallel_pass(const PassSpec& pass, ParallelSpec& p) {
  const OptimizationInfo* info = find_optimization(pass.name);
  const auto* apply = info != nullptr ? std::get_if<ParallelPassFn>(&info->apply) : nullptr;
  if (apply == nullptr) return false;
  validate(pass);
  (*apply)(pass, p);
  return true;
}

ParallelSpec step_parallel(const ParallelSpec& base, const std::vector<StackStep>& stack, std::size_t upto) {
  ParallelSpec p = base;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i)
    for (const PassSpec& pass : stack[i].passes) (void)apply_parallel_pass(pass, p);
  return p;
}

void apply_graph_pass(const PassSpec& p, Graph& g) {
  validate(p);
  if (const auto* apply = std::get_if<GraphPassFn>(&find_optimization(p.name)->apply)) (*apply)(p, g);
}

Graph build_stack_graph(const ModelConfig& m, const Workload& w,
                        const std::vector<StackStep>& stack, std::size_t upto,
                        const BuildOptions& o) {
  if (stack.empty()) {
    Graph g = build_graph(m, w, o);
    g.check();
    return g;
  }
  if (upto >= stack.size())
    throw std::out_of_range(
        fmt::format("stack step {} requested but the stack has {} steps", upto, stack.size()));
  Workload wl = w;
  for (std::size_t i = 0; i <= upto; ++i)
    for (const PassSpec& p : stack[i].passes) (void)apply_workload_pass(p, wl);
  Graph g = build_graph(m, wl, o);
  for (std::size_t i = 0; i <= upto; ++i) {
    for (const PassSpec& p : stack[i].passes) apply_graph_pass(p, g);
    g.applied.push_back(stack[i].name);
  }
  g.check();
  return g;
}

}  // namespace perfsim
