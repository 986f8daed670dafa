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
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string_view>

#include "core/errors.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

using json = nlohmann::json;

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

// ---------------------------------------------------------------------------------------------
// Files

std::string read_input(const std::string& path, const char* what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw ConfigError(fmt::format("cannot read {} '{}': no such file", what, path));
  if (fs::is_directory(path, ec))
    throw ConfigError(fmt::format("cannot read {} '{}': it is a directory, not a file", what, path));
  auto text = read_text_file(path);
  if (!text) throw ConfigError(fmt::format("cannot read {} '{}': it cannot be opened (check its permissions)", what, path));
  return std::move(*text);
}

// The file's lines without their line ends (and without a leading UTF-8 byte order mark).
std::vector<std::string_view> lines_of(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const std::size_t last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

[[noreturn]] void fail_at(const std::string& path, std::size_t line, const std::string& what) {
  throw ConfigError(fmt::format("{}:{}: {}", path, line, what));
}

// A whole number held exactly by a double (token counts, group numbers), or nullopt.
std::optional<int64_t> whole_number(double v) {
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > static_cast<double>(kNoLimit)) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// A field a trace row may have: its name and the other name accepted for it.
struct Column {
  const char* name;
  const char* alias;  // nullptr: none
};
constexpr Column kArrival{"arrival", "timestamp"};
constexpr Column kPrompt{"prompt", "input_tokens"};
constexpr Column kOutput{"output", "output_tokens"};
constexpr Column kPrefixGroup{"prefix_group", nullptr};
constexpr Column kPrefixTokens{"prefix_tokens", nullptr};

const char* kTraceExample = R"(like {"arrival": 0.5, "prompt": 512, "output": 128})";

std::string names_of(const Column& c) {
  return c.alias ? fmt::format("\"{}\" (or \"{}\")", c.name, c.alias) : fmt::format("\"{}\"", c.name);
}

// One field of a trace row as read: absent, or present as a number or as text that is not one.
struct Field {
  std::string name;               // the key or column the file used
  bool present = false;
  std::optional<double> number;
  std::string text;               // what was there, for the error
};

// Reads one row's fields into a request, checking each; `line` and `path` name it in errors.
class RowReader {
 public:
  RowReader(const std::string& path, std::size_t line) : path_(path), line_(line) {}

  double seconds(const Field& f, const Column& c) {
    const double v = required(f, c);
    if (!(v >= 0 && std::isfinite(v)))
      fail_at(path_, line_, fmt::format("\"{}\" must be >= 0 seconds (got {})", f.name, f.text));
    return v;
  }

  int64_t tokens(const Field& f, const Column& c) {
    const auto n = whole_number(required(f, c));
    if (!n || *n < 1)
      fail_at(path_, line_, fmt::format("\"{}\" must be a whole number of tokens >= 1 (got {})", f.name, f.text));
    return *n;
  }

  // An optional whole number >= 0; nullopt when absent.
  std::optional<int64_t> optional_count(const Field& f, const char* what) {
    if (!f.present) return std::nullopt;
    const auto n = f.number ? whole_number(*f.number) : std::nullopt;
    if (!n || *n < 0)
      fail_at(path_, line_, fmt::format("\"{}\" must be a whole number >= 0 {} (got {}); leave it out for none",
                                        f.name, what, f.text));
    return n;
  }

  [[noreturn]] void fail(const std::string& what) const { fail_at(path_, line_, what); }

 private:
  double required(const Field& f, const Column& c) {
    if (!f.present) fail_at(path_, line_, fmt::format("missing {}; each request needs arrival, prompt and output", names_of(c)));
    if (!f.number) fail_at(path_, line_, fmt::format("\"{}\" must be a number (got {})", f.name, f.text));
    return *f.number;
  }

  const std::string& path_;
  std::size_t line_;
};

struct RowFields {
  Field arrival, prompt, output, prefix_group, prefix_tokens;
};

Request to_request(const std::string& path, std::size_t line, const RowFields& f) {
  RowReader row(path, line);
  Request r;
  r.arrival = row.seconds(f.arrival, kArrival);
  r.prompt = row.tokens(f.prompt, kPrompt);
  r.output = row.tokens(f.output, kOutput);
  const auto group = row.optional_count(f.prefix_group, "(the shared prefix's number)");
  const auto prefix = row.optional_count(f.prefix_tokens, "(tokens of the shared prefix)");
  if (group && !prefix) row.fail("\"prefix_group\" needs \"prefix_tokens\" (how many prompt tokens the prefix is)");
  if (prefix && !group) row.fail("\"prefix_tokens\" needs \"prefix_group\" (which shared prefix they are)");
  if (group) {
    if (*prefix > r.prompt)
      row.fail(fmt::format("\"prefix_tokens\" = {} is more than the prompt's {} tokens", *prefix, r.prompt));
    r.prefix_group = *group;
    r.prefix_tokens = *prefix;
  }
  return r;
}

Field json_field(const json& object, const Column& c) {
  Field f;
  f.name = c.name;
  auto it = object.find(c.name);
  if (it == object.end() && c.alias) {
    it = object.find(c.alias);
    if (it != object.end()) f.name = c.alias;
  }
  if (it == object.end() || it->is_null()) return f;  // null reads as absent
  f.present = true;
  f.text = it->dump();
  if (f.text.size() > 40) f.text = f.text.substr(0, 37) + "...";
  if (it->is_number()) f.number = it->get<double>();
  return f;
}

// nlohmann's parse error without its "[json.exception...] parse error at line 1, column N: "
// preamble (the line is the file's, given separately).
std::string json_error_detail(const json::parse_error& e) {
  const std::string what = e.what();
  const std::size_t column = what.find("column ");
  const std::size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

void read_jsonl(const std::string& path, const std::vector<std::string_view>& lines, std::vector<Request>& out,
                std::vector<std::size_t>& line_numbers) {
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view text = trim(lines[i]);
    if (text.empty()) continue;
    const std::size_t line = i + 1;
    json object;
    try {
      object = json::parse(text);
    } catch (const json::parse_error& e) {
      fail_at(path, line, fmt::format("invalid JSON at column {}: {}; write one object per line, {}", e.byte,
                                      json_error_detail(e), kTraceExample));
    }
    if (!object.is_object())
      fail_at(path, line, fmt::format("expected a JSON object {}, got {}", kTraceExample, object.type_name()));
    RowFields f{json_field(object, kArrival), json_field(object, kPrompt), json_field(object, kOutput),
                json_field(object, kPrefixGroup), json_field(object, kPrefixTokens)};
    out.push_back(to_request(path, line, f));
    line_numbers.push_back(line);
  }
}

void read_csv(const std::string& path, const std::vector<std::string_view>& lines, std::vector<Request>& out,
              std::vector<std::size_t>& line_numbers) {
  std::size_t i = 0;
  while (i < lines.size() && trim(lines[i]).empty()) ++i;
  if (i == lines.size()) return;
  const std::size_t header_line = i + 1;
  const auto header = split_csv_line(lines[i]);
  if (!header) fail_at(path, header_line, "the header has a quoted name that does not end on its line");
  auto column_of = [&](const Column& c, std::string& used) -> int {
    for (const char* name : {c.name, c.alias}) {
      if (!name) continue;
      for (std::size_t k = 0; k < header->size(); ++k)
        if (to_lower(trim((*header)[k])) == name) {
          used = name;
          return static_cast<int>(k);
        }
    }
    used = c.name;
    return -1;
  };
  const Column* columns[] = {&kArrival, &kPrompt, &kOutput, &kPrefixGroup, &kPrefixTokens};
  int index[5];
  std::string used[5];
  for (int c = 0; c < 5; ++c) {
    index[c] = column_of(*columns[c], used[c]);
    if (index[c] < 0 && c < 3)
      fail_at(path, header_line,
              fmt::format("the header has no {} column; a CSV trace starts with a header such as "
                          "arrival,prompt,output (optional: prefix_group,prefix_tokens)",
                          names_of(*columns[c])));
  }
  for (++i; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::size_t line = i + 1;
    const auto cells = split_csv_line(lines[i]);
    if (!cells) fail_at(path, line, "a quoted field does not end on its line");
    if (cells->size() != header->size())
      fail_at(path, line, fmt::format("{} fields where the header (line {}) names {}; write one value per column",
                                      cells->size(), header_line, header->size()));
    Field fields[5];
    for (int c = 0; c < 5; ++c) {
      fields[c].name = used[c];
      if (index[c] < 0) continue;
      const std::string_view cell = trim((*cells)[static_cast<std::size_t>(index[c])]);
      if (cell.empty()) continue;  // an empty cell reads as absent
      fields[c].present = true;
      fields[c].text = fmt::format("'{}'", cell);
      fields[c].number = parse_number(cell);
    }
    out.push_back(to_request(path, line, RowFields{fields[0], fields[1], fields[2], fields[3], fields[4]}));
    line_numbers.push_back(line);
  }
}

}  // namespace

std::vector<Request> read_trace(const std::string& path) {
  const std::string text = read_input(path, "trace");
  const auto lines = lines_of(text);
  // JSONL when the first non-blank line opens an object; anything else is read as CSV.
  const auto first = std::find_if(lines.begin(), lines.end(), [](std::string_view l) { return !trim(l).empty(); });
  const bool jsonl = first != lines.end() && trim(*first).front() == '{';

  std::vector<Request> requests;
  std::vector<std::size_t> line_numbers;
  if (jsonl) read_jsonl(path, lines, requests, line_numbers);
  else read_csv(path, lines, requests, line_numbers);
  if (requests.empty())
    throw ConfigError(fmt::format("{}: the trace holds no requests; write one per line as JSON ({}) or as CSV "
                                  "under an arrival,prompt,output header",
                                  path, kTraceExample));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].id = static_cast<int64_t>(i);
    if (i > 0 && requests[i].arrival < requests[i - 1].arrival)
      fail_at(path, line_numbers[i],
              fmt::format("arrival {} s is before the previous request's {} s; sort the trace by arrival time",
                          requests[i].arrival, requests[i - 1].arrival));
  }
  return requests;
}

std::vector<int64_t> read_lengths(const std::string& path) {
  const std::string text = read_input(path, "lengths file");
  const auto lines = lines_of(text);
  std::vector<int64_t> lengths;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = trim(lines[i]);
    if (line.empty() || line.front() == '#') continue;
    int64_t tokens = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), tokens);
    if (ec != std::errc() || end != line.data() + line.size())
      fail_at(path, i + 1, fmt::format("expected one whole number of tokens per line (got '{}')", line));
    if (tokens < 1) fail_at(path, i + 1, fmt::format("a token count must be >= 1 (got {})", tokens));
    lengths.push_back(tokens);
  }
  if (lengths.empty())
    throw ConfigError(fmt::format("{}: no lengths; write one positive token count per line", path));
  return lengths;
}

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
