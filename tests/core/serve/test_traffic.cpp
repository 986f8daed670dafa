// Serving traffic: seeded request generation (arrivals, lengths, prefixes), trace and lengths
// files, and ServeSpec's checks.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/serve/traffic.hpp"
#include "core/config/serve.hpp"

using namespace perfsim;
namespace fs = std::filesystem;

namespace {

ServeSpec open_loop(ArrivalKind kind, double rate, int64_t requests, uint64_t seed = 1) {
  ServeSpec s;
  s.arrivals.kind = kind;
  s.arrivals.rate = rate;
  s.requests = requests;
  s.seed = seed;
  return s;
}

// The gaps between arrivals, the first measured from time 0.
std::vector<double> gaps_of(const std::vector<Request>& requests) {
  std::vector<double> gaps;
  double previous = 0;
  for (const Request& r : requests) gaps.push_back(r.arrival - previous), previous = r.arrival;
  return gaps;
}

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

double stddev_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return std::sqrt(sum / double(v.size() - 1));
}

double cv_of(const std::vector<double>& v) { return stddev_of(v) / mean_of(v); }

std::vector<double> prompts_of(const std::vector<Request>& requests) {
  std::vector<double> out;
  for (const Request& r : requests) out.push_back(double(r.prompt));
  return out;
}

// A per-process temporary folder, removed when the test program exits.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("perfsim_traffic_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// A file in the temporary folder, holding `text`.
std::string temp_file(const std::string& name, const std::string& text) {
  static const TempDir dir;
  const fs::path path = dir.path / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

std::string validate_error(const ServeSpec& s) {
  return error_of([&] { validate(s); });
}

}  // namespace

TEST_CASE("traffic: the same seed gives the same requests, another seed others") {
  ServeSpec s = open_loop(ArrivalKind::gamma, 5, 500, 42);
  s.arrivals.burstiness = 0.7;
  s.prompt.dist = LengthDist::lognormal;
  s.prompt.mean = 600;
  s.output.dist = LengthDist::uniform;
  s.output.min = 10, s.output.max = 300;
  s.prefix.groups = 4, s.prefix.tokens = 100, s.prefix.share = 0.5;
  const auto a = make_requests(s, 4096);
  const auto b = make_requests(s, 4096);
  REQUIRE(a.size() == 500);
  bool same = true;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].id == int64_t(i));
    same = same && a[i].arrival == b[i].arrival && a[i].prompt == b[i].prompt && a[i].output == b[i].output &&
           a[i].prefix_group == b[i].prefix_group && a[i].prefix_tokens == b[i].prefix_tokens;
  }
  CHECK(same);

  s.seed = 43;
  const auto c = make_requests(s, 4096);
  int arrivals_differ = 0, prompts_differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    arrivals_differ += a[i].arrival != c[i].arrival;
    prompts_differ += a[i].prompt != c[i].prompt;
  }
  CHECK(arrivals_differ > 450);
  CHECK(prompts_differ > 400);
}

TEST_CASE("traffic: changing the arrivals leaves the lengths as they were") {
  ServeSpec s = open_loop(ArrivalKind::poisson, 2, 300);
  s.prompt.dist = LengthDist::normal;
  s.prompt.mean = 400;
  const auto slow = make_requests(s, 4096);
  s.arrivals.kind = ArrivalKind::gamma;
  s.arrivals.rate = 20, s.arrivals.burstiness = 0.3;
  const auto fast = make_requests(s, 4096);
  for (std::size_t i = 0; i < slow.size(); ++i) CHECK(slow[i].prompt == fast[i].prompt);
  CHECK(slow.back().arrival > fast.back().arrival);
}

TEST_CASE("traffic: Poisson gaps have mean 1/rate and a coefficient of variation of 1") {
  const double rate = 8;
  const auto requests = make_requests(open_loop(ArrivalKind::poisson, rate, 20000), 4096);
  CHECK(requests.front().arrival > 0);  // the first request comes after one gap
  const auto gaps = gaps_of(requests);
  for (double g : gaps) REQUIRE(g >= 0);
  CHECK(mean_of(gaps) == doctest::Approx(1 / rate).epsilon(0.03));
  CHECK(cv_of(gaps) == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("traffic: gamma gaps keep the mean 1/rate with a CV of sqrt(1/burstiness)") {
  const double rate = 4;
  for (double burstiness : {0.5, 1.0, 3.0}) {
    CAPTURE(burstiness);
    ServeSpec s = open_loop(ArrivalKind::gamma, rate, 20000, 7);
    s.arrivals.burstiness = burstiness;
    const auto gaps = gaps_of(make_requests(s, 4096));
    CHECK(mean_of(gaps) == doctest::Approx(1 / rate).epsilon(0.03));
    CHECK(cv_of(gaps) == doctest::Approx(std::sqrt(1 / burstiness)).epsilon(0.05));
  }
}

TEST_CASE("traffic: a ramp's gaps shrink as its rate rises, even from 0") {
  ServeSpec s = open_loop(ArrivalKind::ramp, 50, 5000);
  s.arrivals.start_rate = 0;
  const auto gaps = gaps_of(make_requests(s, 4096));
  const std::size_t tenth = gaps.size() / 10;
  const std::vector<double> first(gaps.begin(), gaps.begin() + long(tenth));
  const std::vector<double> last(gaps.end() - long(tenth), gaps.end());
  for (double g : gaps) REQUIRE(std::isfinite(g));
  CHECK(mean_of(last) < mean_of(first));
  // The last tenth runs at about 47.5 requests/s on average (rates 45 to 50).
  CHECK(mean_of(last) == doctest::Approx(1 / 47.5).epsilon(0.1));
}

TEST_CASE("traffic: a closed loop assigns users in turn and leaves arrivals to the engine") {
  ServeSpec s;
  s.arrivals.kind = ArrivalKind::closed;
  s.arrivals.users = 3;
  s.arrivals.think = 0.5;
  s.requests = 10;
  const auto requests = make_requests(s, 4096);
  REQUIRE(requests.size() == 10);
  for (const Request& r : requests) {
    CHECK(r.arrival == 0);
    CHECK(r.user == int(r.id % 3));
  }
}

TEST_CASE("traffic: lognormal and normal lengths have the requested mean and spread") {
  ServeSpec s = open_loop(ArrivalKind::poisson, 1, 20000);
  s.prompt.dist = LengthDist::lognormal;
  s.prompt.mean = 1000, s.prompt.stddev = 800;
  s.prompt.max = 1'000'000;  // far above any draw, so nothing is clamped
  auto prompts = prompts_of(make_requests(s, 0));
  CHECK(mean_of(prompts) == doctest::Approx(1000).epsilon(0.03));
  CHECK(stddev_of(prompts) == doctest::Approx(800).epsilon(0.1));

  s.prompt.dist = LengthDist::normal;
  s.prompt.mean = 2000, s.prompt.stddev = 0;  // 0: half the mean
  prompts = prompts_of(make_requests(s, 0));
  CHECK(mean_of(prompts) == doctest::Approx(2000).epsilon(0.03));
  CHECK(stddev_of(prompts) == doctest::Approx(1000).epsilon(0.05));
}

TEST_CASE("traffic: fixed and uniform lengths stay in their bounds") {
  ServeSpec s = open_loop(ArrivalKind::poisson, 1, 5000);
  s.prompt.mean = 100.6;  // fixed: rounded
  s.output.dist = LengthDist::uniform;
  s.output.min = 10, s.output.max = 20;
  bool low_seen = false, high_seen = false;
  for (const Request& r : make_requests(s, 4096)) {
    CHECK(r.prompt == 101);
    REQUIRE(r.output >= 10);
    REQUIRE(r.output <= 20);
    low_seen = low_seen || r.output == 10;
    high_seen = high_seen || r.output == 20;
  }
  CHECK(low_seen);
  CHECK(high_seen);

  // A fixed mean outside [min, max] is clamped.
  s.prompt.mean = 5000, s.prompt.max = 300;
  CHECK(make_requests(s, 4096).front().prompt == 300);
}

TEST_CASE("traffic: lengths are clamped to max_seq and prompt + output fits it") {
  ServeSpec s = open_loop(ArrivalKind::poisson, 1, 2000);
  s.prompt.dist = LengthDist::lognormal;
  s.prompt.mean = 3000;  // mostly above the model's 2048
  s.output.dist = LengthDist::normal;
  s.output.mean = 500;
  int at_limit = 0;
  for (const Request& r : make_requests(s, 2048)) {
    REQUIRE(r.prompt >= 1);
    REQUIRE(r.output >= 1);
    REQUIRE(r.prompt + r.output <= 2048);
    at_limit += r.prompt + r.output == 2048;
  }
  CHECK(at_limit > 1000);

  // Uniform with max 0 draws up to max_seq; a min above max_seq cannot be met.
  s.prompt.dist = LengthDist::uniform;
  s.prompt.min = 100;
  s.output.dist = LengthDist::fixed, s.output.mean = 1;
  for (const Request& r : make_requests(s, 512)) REQUIRE(r.prompt <= 511);
  s.prompt.min = 600;
  CHECK(error_of([&] { (void)make_requests(s, 512); }).find("serve.prompt.min") != std::string::npos);
}

TEST_CASE("traffic: prefixes are shared by the requested share, never longer than the prompt") {
  ServeSpec s = open_loop(ArrivalKind::poisson, 1, 20000);
  s.prompt.dist = LengthDist::uniform;
  s.prompt.min = 50, s.prompt.max = 400;
  s.prefix.groups = 5, s.prefix.tokens = 200, s.prefix.share = 0.3;
  int with_prefix = 0;
  std::vector<int> per_group(5);
  for (const Request& r : make_requests(s, 4096)) {
    if (r.prefix_group < 0) {
      REQUIRE(r.prefix_tokens == 0);
      continue;
    }
    ++with_prefix;
    REQUIRE(r.prefix_group < 5);
    ++per_group[std::size_t(r.prefix_group)];
    REQUIRE(r.prefix_tokens == std::min<int64_t>(200, r.prompt));
  }
  CHECK(with_prefix / 20000.0 == doctest::Approx(0.3).epsilon(0.05));
  for (int n : per_group) CHECK(n / double(with_prefix) == doctest::Approx(0.2).epsilon(0.1));

  s.prefix.share = 1;
  for (const Request& r : make_requests(s, 4096)) REQUIRE(r.prefix_group >= 0);
  s.prefix.share = 0;
  for (const Request& r : make_requests(s, 4096)) REQUIRE(r.prefix_group == -1);
}

TEST_CASE("traffic: read_trace reads JSONL and CSV") {
  const std::string jsonl = temp_file("trace.jsonl",
                                      "{\"arrival\": 0.5, \"prompt\": 512, \"output\": 128}\n"
                                      "\n"
                                      "{\"timestamp\": 0.5, \"input_tokens\": 100, \"output_tokens\": 7, "
                                      "\"prefix_group\": 2, \"prefix_tokens\": 64}\n"
                                      "{\"arrival\": 1.25, \"prompt\": 3, \"output\": 1, \"prefix_group\": null}\n");
  auto t = read_trace(jsonl);
  REQUIRE(t.size() == 3);
  CHECK(t[0].id == 0);
  CHECK(t[0].arrival == 0.5);
  CHECK(t[0].prompt == 512);
  CHECK(t[0].output == 128);
  CHECK(t[0].prefix_group == -1);
  CHECK(t[1].id == 1);
  CHECK(t[1].prompt == 100);
  CHECK(t[1].output == 7);
  CHECK(t[1].prefix_group == 2);
  CHECK(t[1].prefix_tokens == 64);
  CHECK(t[2].arrival == 1.25);
  CHECK(t[2].prefix_group == -1);

  const std::string csv = temp_file("trace.csv",
                                    "timestamp, input_tokens, output_tokens, prefix_group, prefix_tokens\r\n"
                                    "0,10,20,,\r\n"
                                    "0.25,30,40,1,30\r\n"
                                    "\r\n"
                                    "2.5,\"50\",60,,\r\n");
  t = read_trace(csv);
  REQUIRE(t.size() == 3);
  CHECK(t[0].arrival == 0);
  CHECK(t[0].prompt == 10);
  CHECK(t[0].output == 20);
  CHECK(t[0].prefix_group == -1);
  CHECK(t[1].arrival == 0.25);
  CHECK(t[1].prefix_group == 1);
  CHECK(t[1].prefix_tokens == 30);
  CHECK(t[2].id == 2);
  CHECK(t[2].arrival == 2.5);
  CHECK(t[2].prompt == 50);
  CHECK(t[2].output == 60);
}

TEST_CASE("traffic: each malformed trace line is an error naming path:line") {
  struct Case {
    const char* name;
    const char* text;
    int line;
    const char* says;
  };
  const Case cases[] = {
      {"bad_json.jsonl",
       "{\"arrival\": 0, \"prompt\": 1, \"output\": 1}\n{\"arrival\": 1, \"prompt\": 1, \"output\": 1}\n"
       "{\"arrival\": 2, \"prompt\": 1,\n",
       3, "invalid JSON"},
      {"not_object.jsonl", "{\"arrival\": 0, \"prompt\": 1, \"output\": 1}\n[1, 2]\n", 2, "JSON object"},
      // Found by fuzz_traffic: a number beyond a double once escaped as nlohmann's out_of_range.
      {"huge_number.jsonl", "{\"arrival\": 31E999999999999999999999995, \"prompt\": 1, \"output\": 1}\n", 1,
       "a number out of range"},
      {"no_output.jsonl", "{\"arrival\": 0, \"prompt\": 1, \"output\": 1}\n{\"arrival\": 1, \"prompt\": 4}\n", 2,
       "missing \"output\""},
      {"decreasing.jsonl",
       "{\"arrival\": 0, \"prompt\": 1, \"output\": 1}\n{\"arrival\": 3, \"prompt\": 1, \"output\": 1}\n"
       "{\"arrival\": 2, \"prompt\": 1, \"output\": 1}\n",
       3, "sort the trace"},
      {"negative_prompt.jsonl", "{\"arrival\": 0, \"prompt\": -5, \"output\": 1}\n", 1, "\"prompt\" must be"},
      {"string_arrival.jsonl", "{\"arrival\": \"soon\", \"prompt\": 1, \"output\": 1}\n", 1, "must be a number"},
      {"negative_arrival.jsonl", "{\"arrival\": -1, \"prompt\": 1, \"output\": 1}\n", 1, ">= 0 seconds"},
      {"long_prefix.jsonl", "{\"arrival\": 0, \"prompt\": 10, \"output\": 1, \"prefix_group\": 0, \"prefix_tokens\": 11}\n",
       1, "prefix_tokens"},
      {"no_column.csv", "arrival,prompt\n0,1\n", 1, "no \"output\" (or \"output_tokens\") column"},
      {"negative_prompt.csv", "arrival,prompt,output\n0,1,1\n\n1,-3,1\n", 4, "\"prompt\" must be"},
      {"decreasing.csv", "arrival,prompt,output\n5,1,1\n4,1,1\n", 3, "sort the trace"},
      {"not_number.csv", "arrival,prompt,output\n0,many,1\n", 2, "must be a number"},
      {"fields.csv", "arrival,prompt,output\n0,1\n", 2, "fields where the header"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string path = temp_file(c.name, c.text);
    const std::string message = error_of([&] { (void)read_trace(path); });
    CAPTURE(message);
    CHECK(message.find(path + ":" + std::to_string(c.line) + ": ") == 0);
    CHECK(message.find(c.says) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }

  const std::string empty = temp_file("empty.jsonl", "\n  \n");
  CHECK(error_of([&] { (void)read_trace(empty); }).find("no requests") != std::string::npos);
  const std::string header_only = temp_file("header_only.csv", "arrival,prompt,output\n");
  CHECK(error_of([&] { (void)read_trace(header_only); }).find("no requests") != std::string::npos);
  const std::string missing = (fs::temp_directory_path() / "perfsim_no_such_trace.jsonl").string();
  CHECK(error_of([&] { (void)read_trace(missing); }) == "cannot read trace '" + missing + "': no such file");
}

TEST_CASE("traffic: a trace arrival kind takes the trace's first requests") {
  const std::string path = temp_file("five.csv", "arrival,prompt,output\n0,10,5\n1,20,5\n2,30,5\n3,40,5\n4,50,5\n");
  ServeSpec s;
  s.arrivals.kind = ArrivalKind::trace;
  s.arrivals.file = path;
  s.prompt.mean = 999;  // ignored: the trace has the lengths
  s.requests = 3;
  auto requests = make_requests(s, 4096);
  REQUIRE(requests.size() == 3);
  CHECK(requests[2].arrival == 2);
  CHECK(requests[2].prompt == 30);
  s.requests = 100;  // more than the trace holds: all of them
  requests = make_requests(s, 4096);
  CHECK(requests.size() == 5);
  // A trace that names no prefixes gets serve.prefix's.
  s.prefix.groups = 2, s.prefix.tokens = 15, s.prefix.share = 1;
  for (const Request& r : make_requests(s, 4096)) CHECK(r.prefix_tokens == std::min<int64_t>(15, r.prompt));
}

TEST_CASE("traffic: lengths files and the file distribution") {
  const std::string path = temp_file("lengths.txt", "# prompt lengths\n100\n\n  200 \n300\n");
  CHECK(read_lengths(path) == std::vector<int64_t>{100, 200, 300});

  ServeSpec s = open_loop(ArrivalKind::poisson, 1, 3000);
  s.prompt.dist = LengthDist::file;
  s.prompt.file = path;
  int counts[3] = {};
  for (const Request& r : make_requests(s, 4096)) {
    REQUIRE((r.prompt == 100 || r.prompt == 200 || r.prompt == 300));
    ++counts[r.prompt / 100 - 1];
  }
  for (int n : counts) CHECK(n / 3000.0 == doctest::Approx(1 / 3.0).epsilon(0.1));
  s.prompt.values = {7};  // values already read take precedence over the file
  CHECK(make_requests(s, 4096).front().prompt == 7);

  const std::string bad = temp_file("bad_lengths.txt", "10\n# note\nten\n");
  CHECK(error_of([&] { (void)read_lengths(bad); }).find(bad + ":3: ") == 0);
  const std::string zero = temp_file("zero_lengths.txt", "10\n0\n");
  CHECK(error_of([&] { (void)read_lengths(zero); }).find(zero + ":2: ") == 0);
  const std::string empty = temp_file("empty_lengths.txt", "# nothing\n");
  CHECK(error_of([&] { (void)read_lengths(empty); }).find("no lengths") != std::string::npos);
}

TEST_CASE("traffic: validate names the field that cannot describe traffic") {
  CHECK(validate_error(ServeSpec{}).empty());

  ServeSpec s;
  s.arrivals.rate = 0;
  CHECK(validate_error(s) == "serve.arrivals.rate must be > 0 requests/s (got 0)");
  s.where = "scenario.ps:12: ";
  CHECK(validate_error(s) == "scenario.ps:12: serve.arrivals.rate must be > 0 requests/s (got 0)");

  s = {};
  s.arrivals.kind = ArrivalKind::gamma;
  s.arrivals.burstiness = 0;
  CHECK(validate_error(s).find("serve.arrivals.burstiness must be > 0 (got 0)") == 0);

  s = {};
  s.prompt.min = 50, s.prompt.max = 10;
  CHECK(validate_error(s).find("serve.prompt.max = 10 is below min = 50") == 0);

  s = {};
  s.prefix.share = 1.5;
  CHECK(validate_error(s) == "serve.prefix.share must be between 0 and 1 (got 1.5)");

  s = {};
  s.requests = 0;
  CHECK(validate_error(s).find("serve.requests") == 0);
  s = {};
  s.arrivals.kind = ArrivalKind::ramp;
  s.arrivals.start_rate = -1;
  CHECK(validate_error(s).find("serve.arrivals.start_rate") == 0);
  s = {};
  s.arrivals.kind = ArrivalKind::closed;
  CHECK(validate_error(s).find("serve.arrivals.users") == 0);
  s = {};
  s.arrivals.kind = ArrivalKind::trace;
  CHECK(validate_error(s).find("serve.arrivals.file") == 0);
  s = {};
  s.output.dist = LengthDist::lognormal, s.output.mean = 0;
  CHECK(validate_error(s).find("serve.output.mean") == 0);
  s = {};
  s.output.min = 0;
  CHECK(validate_error(s).find("serve.output.min") == 0);
  s = {};
  s.prompt.dist = LengthDist::file;
  CHECK(validate_error(s).find("serve.prompt.file") == 0);
  s = {};
  s.prefix.groups = 3;
  CHECK(validate_error(s).find("serve.prefix.tokens") == 0);
  s = {};
  s.slo.ttft = -1;
  CHECK(validate_error(s).find("serve.slo.ttft") == 0);
  s = {};
  s.arrivals.rate = std::nan("");
  CHECK(validate_error(s).find("serve.arrivals.rate") == 0);

  // make_requests checks the spec too.
  s = {};
  s.arrivals.rate = -2;
  CHECK(error_of([&] { (void)make_requests(s, 4096); }).find("serve.arrivals.rate") == 0);
}
