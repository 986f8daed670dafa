// ServeSpec's checks (see serve.hpp): each bad value is one line that names its field.
#include "core/config/serve.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/errors.hpp"

namespace perfsim {

namespace {

// The most requests one run draws. Each request holds about 1 KiB for the whole run (its
// lengths, its prefix, its record of times): a million take about a gigabyte.
constexpr int64_t kMaxRequests = 1'000'000;

// Throws with the serve{} call's location in front, so the message points at the scenario line.
[[noreturn]] void fail(const ServeSpec& s, const std::string& what) { throw ConfigError(s.where + what); }

// NaN fails every comparison, so each check is written as "must hold" and negated.
void require_positive(const ServeSpec& s, const std::string& field, double v, const char* unit) {
  if (!(v > 0 && std::isfinite(v))) fail(s, fmt::format("serve.{} must be > 0{} (got {})", field, unit, v));
}

void require_non_negative(const ServeSpec& s, const std::string& field, double v, const char* unit) {
  if (!(v >= 0 && std::isfinite(v))) fail(s, fmt::format("serve.{} must be >= 0{} (got {})", field, unit, v));
}

void check_lengths(const ServeSpec& s, const std::string& name, const Lengths& l) {
  // Only the distributions that read mean and stddev check them, so a uniform or file
  // distribution does not trip over the defaults it ignores.
  if (l.dist == LengthDist::fixed || l.dist == LengthDist::normal || l.dist == LengthDist::lognormal) {
    require_positive(s, name + ".mean", l.mean, " tokens");
    require_non_negative(s, name + ".stddev", l.stddev, " tokens");
  }
  if (l.min < 1) fail(s, fmt::format("serve.{}.min must be >= 1 token (got {})", name, l.min));
  if (l.max < 0)
    fail(s, fmt::format("serve.{}.max must be >= min, or 0 for the model's max_seq (got {})", name, l.max));
  if (l.max != 0 && l.max < l.min)
    fail(s, fmt::format("serve.{}.max = {} is below min = {}; raise max (0 = the model's max_seq) or lower min",
                        name, l.max, l.min));
  if (l.dist == LengthDist::file) {
    if (l.file.empty() && l.values.empty())
      fail(s, fmt::format("serve.{}.file must name a lengths file (one token count per line) for dist = file",
                          name));
    for (int64_t v : l.values)
      if (v < 1) fail(s, fmt::format("serve.{}.values must all be >= 1 token (got {})", name, v));
  }
}

void check_arrivals(const ServeSpec& s) {
  const Arrivals& a = s.arrivals;
  switch (a.kind) {
    case ArrivalKind::poisson:
      require_positive(s, "arrivals.rate", a.rate, " requests/s");
      break;
    case ArrivalKind::gamma:
      require_positive(s, "arrivals.rate", a.rate, " requests/s");
      if (!(a.burstiness > 0 && std::isfinite(a.burstiness)))
        fail(s, fmt::format("serve.arrivals.burstiness must be > 0 (got {}); 1 is Poisson, below 1 burstier, "
                            "above 1 more regular",
                            a.burstiness));
      break;
    case ArrivalKind::ramp:
      // start_rate may be 0: each request's rate is taken at the middle of its slot, never 0.
      require_positive(s, "arrivals.rate", a.rate, " requests/s");
      require_non_negative(s, "arrivals.start_rate", a.start_rate, " requests/s");
      break;
    case ArrivalKind::closed:
      if (a.users < 1 || a.users > kMaxRequests)
        fail(s, fmt::format("serve.arrivals.users must be between 1 and {} for closed-loop traffic (got {})",
                            kMaxRequests, a.users));
      require_non_negative(s, "arrivals.think", a.think, " seconds");
      break;
    case ArrivalKind::trace:
      if (a.file.empty()) fail(s, "serve.arrivals.file must name a trace file (JSONL or CSV) for trace arrivals");
      break;
  }
}

}  // namespace

void validate(const ServeSpec& s) {
  if (s.requests < 1 || s.requests > kMaxRequests)
    fail(s, fmt::format("serve.requests must be between 1 and {} (got {}); each request holds about 1 KiB "
                        "through the run",
                        kMaxRequests, s.requests));
  check_arrivals(s);
  check_lengths(s, "prompt", s.prompt);
  check_lengths(s, "output", s.output);

  const Prefixes& p = s.prefix;
  if (p.groups < 0) fail(s, fmt::format("serve.prefix.groups must be >= 0, 0 for none (got {})", p.groups));
  if (p.tokens < 0) fail(s, fmt::format("serve.prefix.tokens must be >= 0 (got {})", p.tokens));
  if (p.groups > 0 && p.tokens == 0)
    fail(s, fmt::format("serve.prefix.tokens must be > 0 when groups = {} (got 0)", p.groups));
  if (!(p.share >= 0 && p.share <= 1))
    fail(s, fmt::format("serve.prefix.share must be between 0 and 1 (got {})", p.share));

  // 0 means no objective, so only a negative (or non-finite) one is wrong.
  require_non_negative(s, "slo.ttft", s.slo.ttft, " seconds");
  require_non_negative(s, "slo.tpot", s.slo.tpot, " seconds");
  require_non_negative(s, "slo.e2e", s.slo.e2e, " seconds");
}

}  // namespace perfsim
