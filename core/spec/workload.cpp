#include "core/spec/workload.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

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
  switch (w.phase) {
    case Phase::prefill: return fmt::format("prefill batch={} prompt={}", w.batch, w.prompt);
    case Phase::decode:
      return fmt::format("decode batch={} prompt={} new_tokens={} (step at context {}{})",
                         w.batch, w.prompt, w.new_tokens, w.decode_context(),
                         w.kv_cache ? "" : ", no KV cache");
    case Phase::train:
      return fmt::format("train micro_batch={} seq={} grad_accum={}", w.batch, w.seq,
                         w.grad_accum);
  }
  return "?";
}

}  // namespace

double Workload::tokens_per_step() const {
  switch (phase) {
    case Phase::prefill: return static_cast<double>(batch * prompt);
    case Phase::decode: return static_cast<double>(batch);
    case Phase::train: return static_cast<double>(batch * seq * grad_accum);
  }
  return 1;
}

std::string describe(const Workload& w) {
  const std::string text = describe_sizes(w);
  return w.host_data ? text + " host_data=true" : text;
}

void validate(const Workload& w) {
  auto positive = [&](int64_t v, const char* field) {
    if (v <= 0)
      throw ConfigError(fmt::format("{}: {} must be > 0 (got {})", name_of(w.phase), field, v));
  };
  positive(w.batch, "batch");
  if (w.phase == Phase::train) {
    positive(w.seq, "seq");
    positive(w.grad_accum, "grad_accum");
  } else {
    positive(w.prompt, "prompt");
    if (w.phase == Phase::decode) positive(w.new_tokens, "new_tokens");
  }
}

}  // namespace perfsim
