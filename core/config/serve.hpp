// Serving traffic: how requests arrive, how long their prompts and outputs are, which share a
// prompt prefix, and the latency objectives they are judged by (the serve{} workload).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace perfsim {

enum class ArrivalKind {
  poisson,  // exponential gaps at `rate`
  gamma,    // gamma gaps of mean 1/rate and shape `burstiness` (vLLM's definition: 1 = Poisson,
            // below 1 burstier, above 1 more regular)
  ramp,     // Poisson whose rate rises linearly from `start_rate` to `rate` over the requests
  closed,   // `users` clients, each sending its next request `think` seconds after its last
            // one completed
  trace,    // arrival times (and lengths) read from `file`
};

struct Arrivals {
  ArrivalKind kind = ArrivalKind::poisson;
  double rate = 1;         // requests/s (poisson, gamma; ramp: the final rate)
  double burstiness = 1;   // gamma shape
  double start_rate = 0;   // ramp: the rate of the first request
  int64_t users = 0;       // closed
  double think = 0;        // closed: seconds
  std::string file;        // trace: JSONL or CSV (traffic.hpp says the columns)
};

enum class LengthDist { fixed, uniform, normal, lognormal, file };

// Token counts drawn per request, clamped to [min, max] (max 0: the model's max_seq).
struct Lengths {
  LengthDist dist = LengthDist::fixed;
  double mean = 128;
  double stddev = 0;       // normal, lognormal: 0 = mean / 2
  int64_t min = 1;
  int64_t max = 0;
  std::string file;        // file: one count per line, drawn uniformly
  std::vector<int64_t> values;  // file: the counts read (filled when the scenario loads)
};

// Shared prompt prefixes (system prompts): `groups` distinct prefixes of `tokens` tokens; a
// request carries one with probability `share`, its group drawn uniformly. A prompt shorter
// than the prefix is the prefix's first tokens.
struct Prefixes {
  int64_t groups = 0;      // 0 = no shared prefixes
  int64_t tokens = 0;
  double share = 1;
};

// Service-level objectives, seconds (0 = none). Goodput counts requests that meet all of them.
struct Slo {
  double ttft = 0;
  double tpot = 0;
  double e2e = 0;
};

struct ServeSpec {
  int64_t requests = 1000;
  uint64_t seed = 1;
  Arrivals arrivals;
  Lengths prompt;
  Lengths output;
  Prefixes prefix;
  Slo slo;
  std::string where;  // "file:line: " of the serve{} call, for errors found later
};

// Throws ConfigError naming the field when a value cannot describe traffic (rate <= 0, a
// negative length, min > max, ...).
void validate(const ServeSpec& s);

}  // namespace perfsim
