// One engine step: the sequences a scheduler runs together, each with the tokens it computes
// this step and where they start in its KV cache. The cost model prices it (step_price.hpp);
// a backend runs it.
#pragma once
#include <cstdint>
#include <vector>

namespace perfsim {

struct SeqWork {
  int64_t request = -1;
  int64_t tokens = 1;     // new tokens computed (1: a decode; more: a prompt or a chunk of one)
  int64_t position = 0;   // tokens already in its KV cache
  bool samples = true;    // the step ends its known tokens and samples the next one
  bool padding = false;   // a finished sequence a static batch still carries (computed, unused)
  // Speculative decoding: draft tokens this step verifies after the sequence's last token (its
  // `tokens` = proposed + 1, each row sampled); 0 for a plain decode, a prompt or a chunk.
  int64_t proposed = 0;
  // One token after cached ones: a decode (anything else is a prompt or a chunk of one).
  [[nodiscard]] bool decodes() const { return tokens == 1 && position > 0; }
};

struct EngineStep {
  std::vector<SeqWork> seqs;
  int64_t swap_in_blocks = 0;   // KV blocks copied back from host memory before the step
  int64_t swap_out_blocks = 0;  // KV blocks copied to host memory (preempted by swap)
  // Each sequence's KV blocks in order (by seqs), when the clock asks for them
  // (StepClock::wants_block_tables); a sequence that holds none has an empty table.
  std::vector<std::vector<int64_t>> block_tables;

  [[nodiscard]] bool empty() const { return seqs.empty(); }
  [[nodiscard]] int64_t tokens() const {
    int64_t t = 0;
    for (const SeqWork& s : seqs) t += s.tokens;
    return t;
  }
  [[nodiscard]] int64_t prefill_tokens() const {
    int64_t t = 0;
    for (const SeqWork& s : seqs)
      if (!s.decodes()) t += s.tokens;
    return t;
  }
  // Rows whose logits the step computes: one a sampling sequence, every verified row of a
  // speculative one.
  [[nodiscard]] int64_t sampled() const {
    int64_t n = 0;
    for (const SeqWork& s : seqs) n += s.samples ? 1 + s.proposed : 0;
    return n;
  }
};

}  // namespace perfsim
