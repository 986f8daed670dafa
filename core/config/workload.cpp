#include "core/config/workload.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"
#include "core/config/size_text.hpp"

namespace perfsim {

const char* name_of(Phase p) {
  switch (p) {
    case Phase::prefill: return "prefill";
    case Phase::decode: return "decode";
    case Phase::train: return "train";
  }
  return "?";
}

namespace {

std::string describe_sizes(const Workload& w) {
  if (w.images)
    return w.phase == Phase::train ? fmt::format("train batch={} images", w.batch)
                                   : fmt::format("inference batch={} images", w.batch);
  switch (w.phase) {
    case Phase::prefill:
      if (w.cached > 0) return fmt::format("prefill batch={} prompt={} cached={}", w.batch, w.prompt, w.cached);
      return fmt::format("prefill batch={} prompt={}", w.batch, w.prompt);
    case Phase::decode:
      return fmt::format("decode batch={} prompt={} new_tokens={} (step at context {}{}{})",
                         w.batch, w.prompt, w.new_tokens, w.decode_context(),
                         w.kv_cache ? "" : ", no KV cache",
                         w.draft_tokens > 0 ? fmt::format(", {} draft tokens a step at acceptance {}",
                                                          w.draft_tokens, w.acceptance)
                                            : std::string());
    case Phase::train:
      return fmt::format("train micro_batch={} seq={} grad_accum={}", w.batch, w.seq,
                         w.grad_accum);
  }
  return "?";
}

}  // namespace

double Workload::tokens_per_step() const {
  if (images) return static_cast<double>(batch * (phase == Phase::train ? grad_accum : 1));
  switch (phase) {
    case Phase::prefill: return static_cast<double>(batch * (prompt - cached));
    case Phase::decode:
      return static_cast<double>(batch) * (draft_tokens > 0 ? speculative_tokens_per_step(acceptance, draft_tokens) : 1.0);
    case Phase::train: return static_cast<double>(batch * seq * grad_accum);
  }
  return 1;
}

double speculative_tokens_per_step(double alpha, int64_t k) {
  if (alpha >= 1) return static_cast<double>(k + 1);
  return (1 - std::pow(alpha, static_cast<double>(k + 1))) / (1 - alpha);
}

std::string describe(const Workload& w) {
  const std::string text = describe_sizes(w);
  return w.host_data ? text + " host_data=true" : text;
}

void validate(const Workload& w) {
  const char* phase = name_of(w.phase);
  auto positive = [&](int64_t v, const char* field) {
    if (v <= 0)
      throw ConfigError(fmt::format("{}: {} must be > 0 (got {})", phase, field, v));
  };
  auto at_most = [&](int64_t v, const char* field, int64_t bound, const char* unit) {
    if (v > bound)
      throw ConfigError(fmt::format("{} {} = {} is beyond {} {}; lower {}", phase, field,
                                    size_text(static_cast<double>(v)), grouped(bound), unit, field));
  };
  positive(w.batch, "batch");
  at_most(w.batch, "batch", max_batch, w.phase == Phase::train ? "sequences per micro-batch" : "sequences");
  // Tokens of one step: every activation and the KV cache scale with it.
  __int128 tokens = 0;
  const char* product = "";
  if (w.phase == Phase::train) {
    positive(w.seq, "seq");
    positive(w.grad_accum, "grad_accum");
    at_most(w.seq, "seq", max_sequence, "tokens");
    at_most(w.grad_accum, "grad_accum", max_grad_accum, "micro-batches");
    tokens = static_cast<__int128>(w.batch) * w.seq * w.grad_accum;
    product = "batch·seq·grad_accum";
  } else {
    positive(w.prompt, "prompt");
    at_most(w.prompt, "prompt", max_sequence, "tokens");
    int64_t sequence = w.prompt;
    if (w.cached < 0 || (w.cached > 0 && (w.phase != Phase::prefill || w.cached >= w.prompt)))
      throw ConfigError(fmt::format("{}: cached must be from 0 to prompt − 1 = {} (a prefill computes at least one token; got {})",
                                    phase, w.prompt - 1, w.cached));
    if (w.draft_tokens < 0 || (w.draft_tokens > 0 && w.phase != Phase::decode))
      throw ConfigError(fmt::format("{}: speculative decoding verifies drafts in decode steps (draft tokens {})", phase,
                                    w.draft_tokens));
    if (w.draft_tokens > 0 && !(w.acceptance > 0 && w.acceptance <= 1))
      throw ConfigError(fmt::format("{}: 'speculative' needs 'acceptance', the chance each draft token is accepted, "
                                    "above 0 and at most 1 (e.g. {{speculative = 4, acceptance = 0.7}})", phase));
    if (w.draft_tokens > 0 && !w.kv_cache)
      throw ConfigError(fmt::format("{}: speculative decoding verifies drafts against the KV cache; kv_cache is off",
                                    phase));
    if (w.phase == Phase::decode) {
      positive(w.new_tokens, "new_tokens");
      at_most(w.new_tokens, "new_tokens", max_sequence, "tokens");
      sequence += w.new_tokens;
      if (sequence > max_sequence)
        throw ConfigError(fmt::format("{} prompt + new_tokens = {} is beyond {} tokens; lower prompt or "
                                      "new_tokens", phase, size_text(static_cast<double>(sequence)), grouped(max_sequence)));
    }
    tokens = static_cast<__int128>(w.batch) * sequence;
    product = w.phase == Phase::decode ? "batch·(prompt+new_tokens)" : "batch·prompt";
  }
  if (tokens > max_step_tokens)
    throw ConfigError(fmt::format("{} {} = {} tokens is beyond {} tokens per step; lower one of them",
                                  phase, product, size_text(static_cast<double>(tokens)),
                                  grouped(max_step_tokens)));
}

}  // namespace perfsim
