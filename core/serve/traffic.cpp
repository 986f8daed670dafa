// Requests drawn from a ServeSpec or read from a trace (see traffic.hpp).
//
// Reproducibility: every random number comes from std::mt19937_64, whose output the standard
// fixes, turned into doubles, exponentials, normals and gammas by the code below rather than by
// std::*_distribution (whose algorithms differ between standard libraries). What remains
// platform-dependent is the last bit of std::log/exp/cos, which can move an arrival time by an
// ulp but practically never a rounded token count.
//
// Draw order. Each quantity has its own engine (a "stream", seeded from spec.seed and the
// stream's number), so changing one setting leaves the others' draws alone: sweeping the rate
// keeps every prompt and output length, and switching to a closed loop keeps them too.
//   arrivals stream (1): per request, its gap (poisson, ramp: one exponential; gamma: one gamma,
//                        whose rejection loop may take several draws); nothing for closed/trace.
//   prompt stream (2):   per request, its prompt length (fixed: no draw; uniform and file: one
//                        integer; normal and lognormal: one normal, two uniforms).
//   output stream (3):   per request, its output length, drawn as the prompt's.
//   prefix stream (4):   per request, when prefix.groups > 0: one uniform (does it carry a
//                        prefix?) then one group index, both drawn whether it carries one or not,
//                        so a request's group does not depend on the share.
#include "core/serve/traffic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <optional>
#include <random>
#include <string_view>

#include "core/errors.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

// The largest token count the generator produces when nothing bounds it: a double holds every
// integer up to here exactly, so rounding and clamping stay exact.
constexpr int64_t kNoLimit = int64_t{1} << 53;

// ---------------------------------------------------------------------------------------------
// Random numbers

// SplitMix64's finalizer: turns (seed, stream) into well-separated engine seeds.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

enum class Stream : uint64_t { arrivals = 1, prompt = 2, output = 3, prefix = 4 };

class RandomStream {
 public:
  RandomStream(uint64_t seed, Stream stream) : engine_(mix64(seed ^ mix64(static_cast<uint64_t>(stream)))) {}

  // [0, 1) from the top 53 bits: every value a multiple of 2^-53, evenly spaced.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // (0, 1]: safe to take the logarithm of.
  double uniform_open_below() { return 1.0 - uniform(); }

  // An integer uniform in [0, n), n >= 1, without modulo bias (draws again below the threshold).
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const uint64_t x = engine_();
      if (x >= threshold) return x % n;
    }
  }

  double exponential(double mean) { return -mean * std::log(uniform_open_below()); }

  // Box–Muller; the second value of the pair is dropped so each call stands alone.
  double normal() {
    const double radius = std::sqrt(-2.0 * std::log(uniform_open_below()));
    return radius * std::cos(2.0 * std::numbers::pi * uniform());
  }

  // Gamma of the given shape and scale 1: Marsaglia and Tsang (2000). A shape below 1 draws
  // shape + 1 and scales by U^(1/shape), their boost for small shapes.
  double gamma(double shape) {
    if (shape < 1) {
      const double boosted = gamma(shape + 1);
      return boosted * std::pow(uniform_open_below(), 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      const double x = normal();
      const double t = 1.0 + c * x;
      if (t <= 0) continue;
      const double v = t * t * t;
      const double u = uniform_open_below();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
      if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
    }
  }

 private:
  std::mt19937_64 engine_;
};

// ---------------------------------------------------------------------------------------------
// Lengths

[[noreturn]] void fail(const ServeSpec& spec, const std::string& what) { throw ConfigError(spec.where + what); }

// One length distribution, resolved against the model: its bounds and (file) its values.
class LengthSampler {
 public:
  LengthSampler(const ServeSpec& spec, const char* name, const Lengths& lengths, int64_t max_seq)
      : lengths_(lengths), lo_(lengths.min) {
    if (lengths.max > 0) hi_ = lengths.max;
    else if (max_seq > 0) hi_ = max_seq;
    else if (lengths.dist == LengthDist::uniform)
      fail(spec, fmt::format("serve.{}: dist = uniform needs a max (or a model max_seq) to draw up to", name));
    else hi_ = kNoLimit;
    hi_ = std::min(hi_, kNoLimit);
    if (lo_ > hi_)
      fail(spec, fmt::format("serve.{}.min = {} is above the model's max_seq = {}; lower min", name, lo_, hi_));
    if (lengths.dist == LengthDist::file) {
      values_ = lengths.values;
      if (values_.empty()) values_ = read_lengths(lengths.file);
    }
    if (lengths.dist == LengthDist::normal || lengths.dist == LengthDist::lognormal) {
      const double stddev = lengths.stddev > 0 ? lengths.stddev : lengths.mean / 2;
      normal_stddev_ = stddev;
      // The lognormal's own mean and stddev give the underlying normal's parameters.
      log_sigma_ = std::sqrt(std::log1p(stddev * stddev / (lengths.mean * lengths.mean)));
      log_mu_ = std::log(lengths.mean) - log_sigma_ * log_sigma_ / 2;
    }
  }

  int64_t draw(RandomStream& random) const {
    switch (lengths_.dist) {
      case LengthDist::fixed: return clamp(lengths_.mean);
      case LengthDist::uniform: return lo_ + static_cast<int64_t>(random.below(static_cast<uint64_t>(hi_ - lo_ + 1)));
      case LengthDist::normal: return clamp(lengths_.mean + normal_stddev_ * random.normal());
      case LengthDist::lognormal: return clamp(std::exp(log_mu_ + log_sigma_ * random.normal()));
      case LengthDist::file: return clamp(static_cast<double>(values_[random.below(values_.size())]));
    }
    return lo_;
  }

 private:
  // Clamped before rounding so a huge draw cannot overflow the integer conversion.
  int64_t clamp(double tokens) const {
    return std::llround(std::clamp(tokens, static_cast<double>(lo_), static_cast<double>(hi_)));
  }

  const Lengths& lengths_;
  int64_t lo_ = 1, hi_ = kNoLimit;
  std::vector<int64_t> values_;
  double normal_stddev_ = 0, log_mu_ = 0, log_sigma_ = 0;
};

// A drawn request longer than the model's context keeps what fits: the prompt is cut to leave
// one output token, and generation stops at max_seq. A trace's requests stay as recorded, and
// the engine refuses those that do not fit (counted and reported).
void fit_context(Request& r, int64_t max_seq) {
  if (max_seq <= 0 || r.prompt + r.output <= max_seq) return;
  r.prompt = std::min(r.prompt, max_seq - 1);
  r.output = max_seq - r.prompt;
  r.prefix_tokens = std::min(r.prefix_tokens, r.prompt);
}

void assign_prefix(Request& r, const Prefixes& prefix, RandomStream& random) {
  const double u = random.uniform();
  const auto group = static_cast<int64_t>(random.below(static_cast<uint64_t>(prefix.groups)));
  if (u < prefix.share) {
    r.prefix_group = group;
    r.prefix_tokens = std::min(prefix.tokens, r.prompt);
  }
}

}  // namespace


std::vector<Request> make_requests(const ServeSpec& spec, int64_t max_seq) {
  validate(spec);
  if (max_seq == 1) fail(spec, "the model's max_seq = 1 leaves no room for a prompt token and an output token");
  const Prefixes& prefix = spec.prefix;
  RandomStream prefix_random(spec.seed, Stream::prefix);

  if (spec.arrivals.kind == ArrivalKind::trace) {
    std::vector<Request> requests = read_trace(spec.arrivals.file);
    if (static_cast<int64_t>(requests.size()) > spec.requests) requests.resize(static_cast<std::size_t>(spec.requests));
    // A trace that names its prefixes keeps them; one that names none gets serve.prefix's.
    const bool has_prefixes = std::any_of(requests.begin(), requests.end(),
                                          [](const Request& r) { return r.prefix_group >= 0; });
    for (Request& r : requests) {
      if (!has_prefixes && prefix.groups > 0) assign_prefix(r, prefix, prefix_random);
    }
    return requests;
  }

  const LengthSampler prompt(spec, "prompt", spec.prompt, max_seq);
  const LengthSampler output(spec, "output", spec.output, max_seq);
  RandomStream arrival_random(spec.seed, Stream::arrivals);
  RandomStream prompt_random(spec.seed, Stream::prompt);
  RandomStream output_random(spec.seed, Stream::output);

  const Arrivals& a = spec.arrivals;
  const int64_t n = spec.requests;
  std::vector<Request> requests(static_cast<std::size_t>(n));
  double clock = 0;
  for (int64_t i = 0; i < n; ++i) {
    Request& r = requests[static_cast<std::size_t>(i)];
    r.id = i;
    // The first request arrives after one gap, as in vLLM's benchmark, not at time 0.
    switch (a.kind) {
      case ArrivalKind::poisson: clock += arrival_random.exponential(1.0 / a.rate); break;
      case ArrivalKind::gamma:
        // Shape k and scale 1/(rate·k): mean gap 1/rate, coefficient of variation 1/sqrt(k).
        clock += arrival_random.gamma(a.burstiness) / (a.rate * a.burstiness);
        break;
      case ArrivalKind::ramp: {
        // The rate at the middle of request i's slot, so a ramp from 0 never has an infinite gap.
        const double rate = a.start_rate + (a.rate - a.start_rate) * (static_cast<double>(i) + 0.5) / static_cast<double>(n);
        clock += arrival_random.exponential(1.0 / rate);
        break;
      }
      case ArrivalKind::closed: r.user = static_cast<int>(i % a.users); break;
      case ArrivalKind::trace: break;
    }
    r.arrival = a.kind == ArrivalKind::closed ? 0.0 : clock;
    r.prompt = prompt.draw(prompt_random);
    r.output = output.draw(output_random);
    fit_context(r, max_seq);
    if (prefix.groups > 0) assign_prefix(r, prefix, prefix_random);
  }
  return requests;
}

}  // namespace perfsim
