// Scenario validation: every check names the field at fault and says what to change.
#include "core/run/scenario.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

namespace {

void validate_hardware(const Hardware& hw) {
  if (hw.name.empty()) throw ConfigError("hardware: a profile has no name; give each one a name");
  if (hw.memory_bandwidth <= 0)
    throw ConfigError(fmt::format("hardware '{}': memory_bandwidth must be > 0 bytes/s (got {})",
                                  hw.name, hw.memory_bandwidth));
  bool any_peak = false;
  for (double p : hw.peak_flops) any_peak = any_peak || p > 0;
  if (!any_peak)
    throw ConfigError(fmt::format(
        "hardware '{}': peak_flops has no positive entry; give at least the fp32 peak", hw.name));
}

void validate_execute(const ExecuteOptions& e, const ModelConfig& m) {
  if (e.repeats < 1 || e.repeats > max_execute_runs)
    throw ConfigError(fmt::format(
        "execute.repeats must be between 1 and {} (got {}); timed runs give the medians", max_execute_runs, e.repeats));
  if (e.warmup < 0 || e.warmup > max_execute_runs)
    throw ConfigError(fmt::format("execute.warmup must be between 0 and {} (got {})", max_execute_runs, e.warmup));
  if (!(e.min_time >= 0) || e.min_time > 3600)
    throw ConfigError(fmt::format("execute.min_time must be seconds in [0, 3600] (got {})", e.min_time));
  if (e.layers < 0)
    throw ConfigError(
        fmt::format("execute.layers must be >= 0 (got {}); 0 executes all layers", e.layers));
  if (!m.image_model() && e.layers > m.layers)  // an image model builds its distinct blocks whole
    throw ConfigError(
        fmt::format("execute.layers = {} exceeds {}'s {} layers; use 0 for all layers", e.layers,
                    m.name, m.layers));
}

void validate_context(const Workload& w, const ModelConfig& m) {
  if (w.phase == Phase::train) {
    if (w.seq > m.max_seq)
      throw ConfigError(
          fmt::format("seq = {} exceeds {}'s max_seq {}; lower seq", w.seq, m.name, m.max_seq));
    return;
  }
  // The KV cache of a prefill or decode holds the whole generation.
  const int64_t context = w.prompt + w.new_tokens;
  if (context > m.max_seq)
    throw ConfigError(
        fmt::format("prompt + new_tokens = {} exceeds {}'s max_seq {}; lower prompt or new_tokens",
                    context, m.name, m.max_seq));
}

// A serving scenario runs one engine on one GPU, its stack of graph passes and engine knobs;
// other scenarios take no engine knobs.
void validate_serving(const Scenario& s) {
  for (const StackStep& step : s.stacks)
    for (const PassSpec& p : step.passes) {
      if (!s.serve && is_kind(p, OptimizationKind::serve))
        throw ConfigError(fmt::format("{}step '{}': '{}' is a serving engine's knob; it needs workload = serve{{...}}",
                                      step.where, step.name, p.name));
      if (s.serve && (p.name == "batch" || p.name == "kv_cache"))
        throw ConfigError(fmt::format(
            "{}step '{}': '{}' sets a fixed batch; a serving engine batches requests itself (use {{scheduler = ...}}, "
            "max_batch)",
            step.where, step.name, p.name));
    }
  if (!s.serve) return;
  validate(*s.serve);
  // dp is the replicas behind the router; tp and pp split each engine over GPUs. What serves
  // no further (context and expert parallelism, sharded weights or states) is named.
  auto serves = [&](const ParallelSpec& p, const std::string& where) {
    std::string what;
    if (p.cp > 1) what = fmt::format("cp = {} (context parallelism splits one sequence's prompt)", p.cp);
    else if (p.ep > 1) what = fmt::format("ep = {} (expert parallelism)", p.ep);
    else if (p.zero > 0 || p.fsdp != FsdpStrategy::none) what = "zero/fsdp (sharding of training state)";
    else if (p.sp) what = "sp = true (sequence parallelism of training)";
    else if (p.interleave > 1) what = fmt::format("interleave = {} (a training pipeline schedule)", p.interleave);
    if (!what.empty())
      throw ConfigError(fmt::format("{}a serving engine does not take {}: serve{{}} runs dp = N replicas of engines "
                                    "split by tp (tensor parallelism) and pp (pipeline stages)",
                                    where, what));
  };
  serves(s.parallel, "parallel: ");
  for (std::size_t i = 0; i < s.stacks.size(); ++i)
    serves(step_parallel(s.parallel, s.stacks, i), fmt::format("{}step '{}': ", s.stacks[i].where, s.stacks[i].name));
}

// Speculative decoding's knobs on a decode workload: each step's workload (its passes and the
// earlier steps') is checked as it will be built; a training or prefill workload has no decode
// steps to speculate in. (A serving scenario's are its scheduler's: scheduler_config checks them.)
void validate_speculation(const Scenario& s) {
  if (s.serve) return;
  Workload w = s.workload;
  for (const StackStep& step : s.stacks) {
    bool acceptance = false, speculative = false;
    for (const PassSpec& p : step.passes) {
      acceptance = acceptance || p.name == "acceptance";
      speculative = speculative || p.name == "speculative";
    }
    if ((acceptance || speculative) && s.workload.phase != Phase::decode)
      throw ConfigError(fmt::format("{}step '{}': '{}' verifies draft tokens in decode steps; this workload is {} "
                                    "(use decode{{...}} or serve{{...}})",
                                    step.where, step.name, speculative ? "speculative" : "acceptance",
                                    name_of(s.workload.phase)));
    for (const PassSpec& p : step.passes) (void)apply_workload_pass(p, w);
    if (acceptance && w.draft_tokens == 0)
      throw ConfigError(fmt::format("{}step '{}': 'acceptance' is the draft tokens' acceptance of speculative "
                                    "decoding: set 'speculative' too",
                                    step.where, step.name));
    try {
      validate(w);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}step '{}': {}", step.where, step.name, e.what()));
    }
  }
}

}  // namespace

// An image model (core/config/cnn.hpp): a batch of images trained or inferred on one GPU.
void validate_image_model(const Scenario& s) {
  const std::string& name = s.model.name;
  if (s.serve)
    throw ConfigError(fmt::format("model '{}' is an image classifier: serve{{}} runs language models (use train{{}} "
                                  "or prefill{{}} for a batch of images)",
                                  name));
  if (s.workload.phase == Phase::decode)
    throw ConfigError(fmt::format("model '{}' is an image classifier: use train{{}} or prefill{{}} (inference over "
                                  "a batch of images), not decode{{}}",
                                  name));
  if (!s.workload.images)
    throw ConfigError(fmt::format("model '{}' is an image classifier but the workload is not a batch of images "
                                  "(Workload::images)",
                                  name));
  if (s.workload.grad_accum > 1)
    throw ConfigError(fmt::format("model '{}': grad_accum is not supported for image models yet (got {})", name,
                                  s.workload.grad_accum));
  // Recomputation re-runs a transformer layer's forward in its backward; a CNN's blocks keep
  // their own counts (core/builders/cnn.cpp), which it would overwrite.
  for (const StackStep& step : s.stacks)
    for (const PassSpec& p : step.passes)
      if (p.name == "recompute")
        throw ConfigError(fmt::format("{}step '{}': recompute is for transformer layers; model '{}' keeps every "
                                      "activation its backward reads",
                                      step.where, step.name, name));
  for (std::size_t i = 0; i <= s.stacks.size(); ++i) {
    const ParallelSpec p = i == 0 ? s.parallel : step_parallel(s.parallel, s.stacks, i - 1);
    if (p.tp > 1 || p.pp > 1 || p.cp > 1 || p.ep > 1 || p.sp || p.zero > 2 || p.fsdp == FsdpStrategy::full_shard ||
        p.fsdp == FsdpStrategy::hybrid_shard)
      throw ConfigError(fmt::format("{}model '{}': image models are laid out by data parallelism only (dp, zero up "
                                    "to 2): tp, pp, cp, ep, sp and sharded weights split transformer layers",
                                    i == 0 ? std::string() : fmt::format("step '{}': ", s.stacks[i - 1].name), name));
  }
}

void validate(const Scenario& s) {
  validate(s.model);
  validate(s.workload);
  const bool images = s.model.image_model();
  if (images) validate_image_model(s);
  else if (s.workload.images)
    throw ConfigError(fmt::format("model '{}' is a language model: the workload cannot be a batch of images",
                                  s.model.name));
  else validate_serving(s);
  if (s.hardware.empty())
    throw ConfigError(fmt::format(
        "scenario '{}': no hardware given; name at least one profile (see `perfsim list hardware`)",
        s.name));
  for (const Hardware& hw : s.hardware) validate_hardware(hw);
  validate_execute(s.execute, s.model);
  if (!images) validate_context(s.workload, s.model);  // the context a KV cache holds
  for (std::size_t i = 0; i < s.stacks.size(); ++i) {
    const StackStep& step = s.stacks[i];
    if (step.name.empty())
      throw ConfigError(
          fmt::format("stack step {} has no name; name it like \"+flash_attention\"", i + 1));
    for (const PassSpec& p : step.passes) validate(p);
  }
  if (images) return;  // its layouts are checked by validate_image_model
  validate_speculation(s);
  // The layout of every step: the scenario's, changed by the steps' parallel passes. A layout
  // a step's pass makes invalid is that step's error.
  validate(s.parallel, s.model, s.workload);
  for (std::size_t i = 0; i < s.stacks.size(); ++i) {
    try {
      validate(step_parallel(s.parallel, s.stacks, i), s.model, s.workload);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("step '{}': {}", s.stacks[i].name, e.what()));
    }
  }
}

}  // namespace perfsim
