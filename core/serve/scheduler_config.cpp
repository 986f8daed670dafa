#include "core/serve/scheduler_config.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"
#include "core/units.hpp"

namespace perfsim {

const char* name_of(SchedulerKind k) {
  switch (k) {
    case SchedulerKind::static_batch: return "static";
    case SchedulerKind::dynamic: return "dynamic";
    case SchedulerKind::continuous: return "continuous";
  }
  return "?";
}

int64_t SchedulerConfig::step_tokens(int64_t max_seq) const {
  if (chunked_prefill > 0) return chunked_prefill;
  if (max_tokens > 0) return max_tokens;
  return std::max<int64_t>(max_seq, 2048);  // vLLM's default without chunked prefill
}

namespace {

// Defaults per scheduler: vLLM's max_num_seqs for continuous batching; a batch of 32 otherwise.
void reset_batching(SchedulerConfig& c) {
  c.max_batch = c.kind == SchedulerKind::continuous ? 256 : 32;
  c.max_wait = 0;
  c.preferred_batch = 0;
}

SchedulerKind kind_of(const std::string& word) {
  if (word == "static") return SchedulerKind::static_batch;
  if (word == "dynamic") return SchedulerKind::dynamic;
  return SchedulerKind::continuous;
}

// Knobs the scheduler in effect after `step` must have.
void check(const SchedulerConfig& c, const StackStep& step, const std::vector<std::string>& set_here) {
  auto fail = [&](const std::string& what) {
    throw ConfigError(fmt::format("{}step '{}': {}", step.where, step.name, what));
  };
  auto here = [&](const char* name) { return std::find(set_here.begin(), set_here.end(), name) != set_here.end(); };
  const bool batch_sched = c.kind != SchedulerKind::continuous;
  if (c.kind != SchedulerKind::dynamic) {
    for (const char* knob : {"max_wait", "preferred_batch"})
      if (here(knob))
        fail(fmt::format("'{}' is a dynamic batching knob, but the scheduler here is {} (set scheduler = "
                         "\"dynamic\", or drop {})",
                         knob, name_of(c.kind), knob));
  }
  if (batch_sched) {
    for (const char* knob : {"max_tokens", "chunked_prefill", "preemption", "prefix_cache"})
      if (here(knob) || (std::string(knob) == "chunked_prefill" && c.chunked_prefill > 0) ||
          (std::string(knob) == "prefix_cache" && c.prefix_cache))
        fail(fmt::format("'{}' needs scheduler = \"continuous\" (the {} scheduler runs each batch to its end)", knob,
                         name_of(c.kind)));
  }
  if (c.prefix_cache && !c.paged)
    fail("'prefix_cache' shares KV blocks and needs 'paged_kv' in this or an earlier step");
  if (c.router == RouterPolicy::prefix && !c.prefix_cache)
    fail("router = \"prefix\" sends a request where its prefix is cached and needs 'prefix_cache' in this or an "
         "earlier step");
  if (c.kind == SchedulerKind::dynamic && c.preferred_batch > c.max_batch)
    fail(fmt::format("preferred_batch = {} is above max_batch = {}", c.preferred_batch, c.max_batch));
  if (c.speculative > 0 && batch_sched)
    fail(fmt::format("'speculative' verifies draft tokens inside continuous batching; the scheduler here is {} (set "
                     "scheduler = \"continuous\")",
                     name_of(c.kind)));
  if (c.speculative > 0 && c.acceptance <= 0)
    fail("'speculative' needs 'acceptance', the chance each draft token is accepted (e.g. {speculative = 4, "
         "acceptance = 0.7})");
  if (here("acceptance") && c.speculative == 0)
    fail("'acceptance' is the draft tokens' acceptance of speculative decoding: set 'speculative' too");
  if ((c.prefill_engines > 0) != (c.decode_engines > 0))
    fail(fmt::format("disaggregated serving needs both prefill_engines and decode_engines (got {} and {}); set "
                     "both, or both to 0",
                     c.prefill_engines, c.decode_engines));
  if (c.disaggregated() && batch_sched)
    fail(fmt::format("prefill_engines and decode_engines hand requests between engines that batch continuously; "
                     "the scheduler here is {} (set scheduler = \"continuous\")",
                     name_of(c.kind)));
  if (here("kv_transfer") && !c.disaggregated())
    fail("'kv_transfer' says when a disaggregated prefill sends its KV; set prefill_engines and decode_engines");
  if (c.max_tokens > 0 && c.chunked_prefill > 0)
    fail("set either max_tokens or chunked_prefill (with chunked prefill it is the tokens per step)");
}

}  // namespace

SchedulerConfig scheduler_config(const std::vector<StackStep>& stack, std::size_t upto) {
  SchedulerConfig c;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i) {
    const StackStep& step = stack[i];
    std::vector<std::string> set_here;
    // The scheduler first, so knobs beside it in the same step apply to the new one.
    for (const PassSpec& p : step.passes)
      if (p.name == "scheduler" && p.text) {
        c.kind = kind_of(*p.text);
        reset_batching(c);
      }
    for (const PassSpec& p : step.passes) {
      if (p.name == "paged_kv") {
        c.paged = true;
        c.block = static_cast<int64_t>(p.value.value_or(static_cast<double>(default_kv_block)));
        continue;
      }
      // Speculative decoding's knobs are workload passes (a decode step takes them too).
      const bool speculation = p.name == "speculative" || p.name == "acceptance";
      if (!is_kind(p, OptimizationKind::serve) && !speculation) continue;
      set_here.push_back(p.name);
      const double v = p.value.value_or(1);
      if (p.name == "max_batch") c.max_batch = static_cast<int64_t>(v);
      else if (p.name == "max_wait") c.max_wait = v;
      else if (p.name == "preferred_batch") c.preferred_batch = static_cast<int64_t>(v);
      else if (p.name == "max_tokens") c.max_tokens = static_cast<int64_t>(v);
      else if (p.name == "chunked_prefill") c.chunked_prefill = static_cast<int64_t>(v);
      else if (p.name == "prefix_cache") c.prefix_cache = true;
      else if (p.name == "preemption") c.preemption = *p.text == "swap" ? Preemption::swap : Preemption::recompute;
      else if (p.name == "gpu_memory") c.gpu_memory = v;
      else if (p.name == "kv_watermark") c.watermark = v;
      else if (p.name == "router") (void)router_policy_of(*p.text, c.router);
      else if (p.name == "prefill_engines") c.prefill_engines = static_cast<int>(v);
      else if (p.name == "decode_engines") c.decode_engines = static_cast<int>(v);
      else if (p.name == "kv_transfer") c.kv_layerwise = *p.text == "layerwise";
      else if (p.name == "speculative") c.speculative = static_cast<int64_t>(v);
      else if (p.name == "acceptance") c.acceptance = v;
    }
    check(c, step, set_here);
  }
  return c;
}

std::string engine_words(int tp, int pp) {
  std::string words;
  if (tp > 1) words = fmt::format("TP{}", tp);
  if (pp > 1) words += fmt::format("{}PP{}", words.empty() ? "" : " × ", pp);
  return words.empty() ? "1 GPU" : words;
}

std::string describe(const SchedulerConfig& c, int64_t max_seq) {
  std::string s = name_of(c.kind);
  switch (c.kind) {
    case SchedulerKind::static_batch: s += fmt::format(", batch {}", c.max_batch); break;
    case SchedulerKind::dynamic:
      s += fmt::format(", batch {}, wait {} ms", c.max_batch, c.max_wait * 1e3);
      if (c.preferred_batch > 0) s += fmt::format(", preferred {}", c.preferred_batch);
      break;
    case SchedulerKind::continuous:
      s += fmt::format(", max {} sequences, {} tokens/step", c.max_batch, c.step_tokens(max_seq));
      if (c.chunked_prefill > 0) s += ", chunked prefill";
      if (c.speculative > 0)
        s += fmt::format(", speculative {} n-gram drafts a step (acceptance {})", c.speculative,
                         format_sig3(c.acceptance));
      break;
  }
  s += c.paged ? fmt::format(", paged KV ({} tokens/block)", c.block) : ", KV reserved per sequence";
  if (c.prefix_cache) s += ", prefix cache";
  if (c.kind == SchedulerKind::continuous && c.preemption == Preemption::swap) s += ", swap on preemption";
  if (c.tp * c.pp > 1)
    s += fmt::format("; {} engine{} of {} GPUs", engine_words(c.tp, c.pp), c.replicas > 1 ? "s" : "", c.tp * c.pp);
  if (c.pp > 1) s += fmt::format(" ({} batches in flight)", c.pp);
  if (c.disaggregated())
    s += fmt::format("; disaggregated {}P{}D, KV sent {}", c.prefill_engines, c.decode_engines,
                     c.kv_layerwise ? "layer by layer" : "after the prefill");
  else if (c.replicas > 1)
    s += fmt::format("; {} replicas, router {}", c.replicas, name_of(c.router));
  return s;
}

}  // namespace perfsim
