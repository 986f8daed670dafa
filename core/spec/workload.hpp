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
  // The inputs (token ids, targets) start in host memory and each step uploads them to the
  // device (copy ops); false: they are already on the device.
  bool host_data = false;

  // Decode graphs describe one step at the mean context of the generation.
  [[nodiscard]] int64_t decode_context() const { return prompt + new_tokens / 2; }
  // Tokens of useful work per graph execution; throughput and speedups use it.
  [[nodiscard]] double tokens_per_step() const;
};

[[nodiscard]] std::string describe(const Workload& w);
[[nodiscard]] const char* name_of(Phase p);

// Throws ConfigError when sizes are non-positive.
void validate(const Workload& w);

}  // namespace perfsim
