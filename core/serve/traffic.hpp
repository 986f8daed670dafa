// The requests a serving run receives: arrival times, prompt and output lengths and prompt
// prefix groups, drawn from a ServeSpec with its seed (the same seed gives the same requests
// on every machine) or read from a trace file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/serve.hpp"

namespace perfsim {

struct Request {
  int64_t id = 0;          // 0, 1, ... in arrival order
  double arrival = 0;      // seconds from the run's start (closed loop: filled by the engine)
  int64_t prompt = 1;      // prompt tokens
  int64_t output = 1;      // output tokens to generate (>= 1)
  int64_t prefix_group = -1;  // shared prefix it starts with (-1: none)
  int64_t prefix_tokens = 0;  // tokens of that prefix (<= prompt)
  int user = -1;           // closed loop: the client that sends it
  // Prompt tokens whose K/V arrive with the request (a disaggregated decode engine's request,
  // its prefill done elsewhere): admitted holding them, it computes only the rest. Lost if the
  // request is preempted by recompute.
  int64_t kv_ready = 0;
};

// Draws spec.requests requests (open loop: arrival times from spec.arrivals; closed loop:
// arrival 0, the engine sets each when its client is ready). `max_seq` clamps lengths whose
// max is 0 and bounds prompt + output. A trace arrival kind reads spec.arrivals.file.
// Deterministic for a given spec (seed included); throws ConfigError on bad values.
[[nodiscard]] std::vector<Request> make_requests(const ServeSpec& spec, int64_t max_seq);

// Reads a trace: JSONL (one object per line: "arrival" or "timestamp" seconds, "prompt" or
// "input_tokens", "output" or "output_tokens", optional "prefix_group" and "prefix_tokens") or
// CSV (a header naming the same columns). Arrivals must not decrease. Errors name file:line.
[[nodiscard]] std::vector<Request> read_trace(const std::string& path);

// Reads a lengths file: one positive integer per line (blank lines and # comments skipped).
[[nodiscard]] std::vector<int64_t> read_lengths(const std::string& path);

}  // namespace perfsim
