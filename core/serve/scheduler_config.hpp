// A serving engine's knobs, as a stack step sets them (serve passes: scheduler, max_batch,
// max_wait, preferred_batch, max_tokens, chunked_prefill, prefix_cache, preemption, gpu_memory,
// kv_watermark, router; paged_kv too, which pages the KV cache), and the replicas behind the
// router (the layout's dp, set by the caller).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/passes/passes.hpp"

namespace perfsim {

enum class SchedulerKind {
  static_batch,  // waits for max_batch requests, runs them to the end (HF generate with a batch)
  dynamic,       // dispatches at max_batch, preferred_batch or after max_wait (Triton's dynamic
                 // batcher), runs the batch to the end
  continuous,    // admits and retires requests every engine step (Orca, vLLM)
};
enum class Preemption { recompute, swap };
// How requests reach the replicas of a service (core/serve/router.hpp).
enum class RouterPolicy {
  round_robin,        // replica (n mod N) for the n-th arrival
  least_outstanding,  // the replica with the fewest requests waiting or running (ties: lowest index)
  prefix,             // the replica whose prefix cache holds most of the prompt; else least_outstanding
};

struct SchedulerConfig {
  SchedulerKind kind = SchedulerKind::continuous;
  int64_t max_batch = 256;      // static/dynamic: batch size; continuous: running sequences
  double max_wait = 0;          // dynamic: seconds
  int64_t preferred_batch = 0;  // dynamic: 0 = none
  int64_t max_tokens = 0;       // continuous: tokens per step (0: max(max_seq, 2048))
  int64_t chunked_prefill = 0;  // continuous: tokens per step with chunked prompts (0: off)
  bool paged = false;           // paged KV blocks (paged_kv); else each sequence reserves max_seq
  int64_t block = 16;           // paged: tokens per block
  bool prefix_cache = false;
  Preemption preemption = Preemption::recompute;
  double gpu_memory = 0.9;      // fraction of GPU memory the engine may use
  double watermark = 0.01;      // fraction of blocks kept free at admission
  int replicas = 1;             // engines behind the router (the layout's dp)
  int tp = 1, pp = 1;           // each engine's tensor-parallel GPUs and pipeline stages (the layout's)
  RouterPolicy router = RouterPolicy::round_robin;
  // Disaggregated prefill and decode (xPyD): engines that only prefill and engines that only
  // decode, a request's KV blocks sent from the one to the other (0 and 0: off).
  int prefill_engines = 0, decode_engines = 0;
  bool kv_layerwise = false;  // each layer's KV sent as it is computed (kv_transfer = "layerwise")
  // Speculative decoding (continuous): k draft tokens a decode step (n-gram prompt lookup, no
  // device work), verified in one pass of k + 1 tokens; each draft accepted with probability
  // `acceptance`, the first rejection ending the run (Leviathan et al. 2023). 0: off.
  int64_t speculative = 0;
  double acceptance = 0;
  [[nodiscard]] bool disaggregated() const { return prefill_engines > 0 && decode_engines > 0; }

  // Tokens one engine step may hold: chunked_prefill, else max_tokens, else max(max_seq, 2048).
  [[nodiscard]] int64_t step_tokens(int64_t max_seq) const;
};

// The knobs of stack steps 0..upto, later steps overriding earlier ones. Changing `scheduler`
// resets the batching knobs (max_batch, max_wait, preferred_batch) to the new scheduler's
// defaults. Throws ConfigError, prefixed with the step's place, for knobs the scheduler in
// effect does not have (max_wait with continuous batching) or that need another (prefix_cache
// without paged_kv).
[[nodiscard]] SchedulerConfig scheduler_config(const std::vector<StackStep>& stack, std::size_t upto);

// An engine's split in words: "TP2", "PP2", "TP2 × PP2"; "1 GPU" when it has one.
[[nodiscard]] std::string engine_words(int tp, int pp);

// "continuous, max 256 sequences, 2048 tokens/step, paged KV (16), prefix cache"
[[nodiscard]] std::string describe(const SchedulerConfig& c, int64_t max_seq);
[[nodiscard]] const char* name_of(SchedulerKind k);
[[nodiscard]] const char* name_of(RouterPolicy p);
// "round_robin", "least_outstanding", "prefix"; false when `name` is none of them.
[[nodiscard]] bool router_policy_of(std::string_view name, RouterPolicy& out);

}  // namespace perfsim
