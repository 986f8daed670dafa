// What is run: an inference prefill, one decode step, or one training step.
#pragma once
#include <cstdint>
#include <string>

namespace perfsim {

enum class Phase { prefill, decode, train };

struct Workload {
  Phase phase = Phase::decode;
  int64_t batch = 1;           // sequences (inference) or micro-batch (training)
  int64_t prompt = 128;        // prefill/decode: prompt tokens
  int64_t new_tokens = 128;    // decode: tokens generated per sequence
  int64_t seq = 1024;          // train: sequence length
  int64_t grad_accum = 1;      // train: micro-batches per optimizer step
  bool kv_cache = true;        // decode: reuse cached K,V (off: recompute the whole context)
  // prefill: leading prompt tokens whose K,V are already cached (a shared prefix, or the chunks
  // before this one): the step computes prompt − cached tokens, attending all prompt tokens.
  int64_t cached = 0;
  // The inputs (token ids, targets) start in host memory and each step uploads them to the
  // device (copy ops); false: they are already on the device.
  bool host_data = false;
  // The batch is of images (an image model, core/config/cnn.hpp): a step's items are its
  // images, counted by tokens_per_step() and reported as images/s (unit_name()).
  bool images = false;
  // decode: speculative decoding (stack knobs `speculative`, `acceptance`): each step verifies
  // `draft_tokens` drafted tokens per sequence in one pass of draft_tokens + 1 rows, each draft
  // accepted with probability `acceptance` until the first rejection. 0: plain decoding.
  int64_t draft_tokens = 0;
  double acceptance = 0;

  // Decode graphs describe one step at the mean context of the generation.
  [[nodiscard]] int64_t decode_context() const { return prompt + new_tokens / 2; }
  // What a step's items are, for rates: "img" for an image model's batch, else "tok".
  [[nodiscard]] const char* unit_name() const { return images ? "img" : "tok"; }
  // Tokens of useful work per graph execution; throughput and speedups use it (a speculative
  // decode step: the tokens one verify pass yields on average, per sequence).
  [[nodiscard]] double tokens_per_step() const;
};

// The tokens a speculative decode step yields on average when each of k drafts is accepted
// with probability alpha until the first rejection, and one token follows the accepted ones:
// (1 − α^(k+1)) / (1 − α) (Leviathan et al. 2023, eq. 1); k + 1 at α = 1.
[[nodiscard]] double speculative_tokens_per_step(double alpha, int64_t k);

[[nodiscard]] std::string describe(const Workload& w);
[[nodiscard]] const char* name_of(Phase p);

// Bounds no real run approaches, chosen so every size derived from a workload (tokens per step,
// activations, the KV cache) stays far from int64 overflow.
inline constexpr int64_t max_batch = int64_t{1} << 24;        // sequences (micro-batch in training)
inline constexpr int64_t max_sequence = int64_t{1} << 24;     // tokens of one sequence
inline constexpr int64_t max_grad_accum = int64_t{1} << 20;   // micro-batches per optimizer step
inline constexpr int64_t max_step_tokens = int64_t{1} << 40;  // batch·(prompt+new_tokens), batch·seq·grad_accum

// Throws ConfigError when sizes are non-positive or beyond the bounds above, naming the field.
void validate(const Workload& w);

}  // namespace perfsim
