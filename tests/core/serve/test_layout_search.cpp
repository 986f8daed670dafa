// Serving layout search: the candidates of 4 GPUs of a tiny model listed by hand, closed-loop
// traffic without prefill/decode splits, a ranking whose answer is clear (a larger batch on a
// backlog), engines that do not fit pruned, and the limiter rule on constructed metrics.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/serve/layout_search.hpp"
#include "core/serve/traffic.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;

namespace {

// Each step costs at least 1 ms of host work, so a larger batch completes more per step.
Hardware tiny_hardware() {
  Hardware hw = test_models::h100_node();
  hw.host_overhead = 1e-3;
  hw.memory_bytes = 1e9;
  hw.price_per_hour = 3.6;
  return hw;
}

ServeSpec traffic(ArrivalKind kind = ArrivalKind::poisson) {
  ServeSpec s;
  s.requests = 24;
  s.seed = 3;
  s.arrivals.kind = kind;
  s.arrivals.rate = 200;
  s.arrivals.users = 4;
  s.prompt.mean = 32;
  s.output.mean = 8;
  return s;
}

std::vector<StackStep> continuous_stack() {
  return {StackStep{"engine",
                    {PassSpec{"flash_attention"}, PassSpec{"scheduler", std::nullopt, "continuous"},
                     PassSpec{"paged_kv"}},
                    ""}};
}

ServeSearchResult search(const ServeSpec& spec, const ServeSearchSpace& space, const Hardware& hw = tiny_hardware()) {
  const ModelConfig m = test_models::tiny_llama();
  return search_serving_layouts(m, hw, spec, make_requests(spec, m.max_seq), continuous_stack(), space);
}

std::multiset<std::string> layouts_of(const ServeSearchResult& r) {
  std::multiset<std::string> out;
  for (const ServeCandidate& c : r.candidates) out.insert(layout_words(c));
  return out;
}

}  // namespace

TEST_CASE("serving layout search: the candidates of 4 GPUs of a tiny Llama") {
  // tiny-llama: 4 layers, 4 heads, 2 KV heads, MLP 128. tp 1, 2, 4, 8 by pp 1, 2, 4: the six
  // engines of 8 GPUs or more, or 8 with tp = 8, do not divide 4 GPUs; tp = 4 does not divide the
  // 2 KV heads. One knob setting, so each service is one candidate.
  ServeSearchSpace space;
  space.gpus = 4;
  space.max_batch = {8};
  space.chunk = {0};
  space.threads = 2;
  const ServeSearchResult r = search(traffic(), space);
  const std::multiset<std::string> expected = {"4 × 1 GPU", "1P3D × 1 GPU", "2P2D × 1 GPU", "3P1D × 1 GPU",
                                               "2 × PP2",   "1P1D × PP2",   "PP4",          "2 × TP2",
                                               "1P1D × TP2", "TP2 × PP2",     "TP4"};
  CHECK(layouts_of(r) == expected);
  CHECK(r.engines_skipped == 6);
  CHECK(r.priced == 10);
  // The pruned come last, with validate's reason.
  const ServeCandidate& tp4 = r.candidates.back();
  CHECK(layout_words(tp4) == "TP4");
  CHECK_FALSE(tp4.priced);
  CHECK(tp4.pruned.find("KV heads") != std::string::npos);
  for (const ServeCandidate& c : r.candidates) {
    CHECK(c.max_batch == 8);
    CHECK(c.chunk == 0);
    if (c.disaggregated()) CHECK(c.layout.dp == 1);
    CHECK(c.engines() * c.layout.tp * c.layout.pp == 4);
    if (c.priced) CHECK(c.cost_per_million > 0);
  }
  // Ranked: goodput per GPU, then output tokens/s per GPU, never rising.
  for (std::size_t i = 1; i < static_cast<std::size_t>(r.priced); ++i) {
    const ServeCandidate &a = r.candidates[i - 1], &b = r.candidates[i];
    CHECK(a.goodput_per_gpu >= b.goodput_per_gpu);
    if (a.goodput_per_gpu == b.goodput_per_gpu) CHECK(a.output_per_gpu >= b.output_per_gpu);
  }
}

TEST_CASE("serving layout search: closed-loop traffic has no prefill/decode splits") {
  ServeSearchSpace space;
  space.gpus = 4;
  space.max_batch = {8};
  space.chunk = {0};
  const ServeSearchResult r = search(traffic(ArrivalKind::closed), space);
  CHECK(layouts_of(r) == std::multiset<std::string>{"4 × 1 GPU", "2 × PP2", "PP4", "2 × TP2", "TP2 × PP2", "TP4"});
  CHECK_FALSE(r.open_loop);
}

TEST_CASE("serving layout search: a larger batch ranks first on a backlog") {
  // Every request at once on one GPU: 24 requests of 8 output tokens take about 24 × 9 steps of
  // 1 ms one at a time, a few dozen steps eight at a time. Without an SLO goodput is throughput.
  ServeSpec spec = traffic();
  spec.arrivals.rate = 1e6;
  ServeSearchSpace space;
  space.gpus = 1;
  space.max_batch = {1, 8};
  space.chunk = {0, 512};
  const ServeSearchResult r = search(spec, space);
  REQUIRE(r.priced == 4);
  CHECK(r.candidates[0].max_batch == 8);
  CHECK(r.candidates[1].max_batch == 8);
  CHECK(r.candidates[2].max_batch == 1);
  CHECK(r.candidates[0].goodput_per_gpu > 3 * r.candidates[2].goodput_per_gpu);
  CHECK(layout_words(r.candidates[0]) == "1 GPU");
  // $/M tokens: the GPU's price over its output tokens per hour.
  const ServeCandidate& best = r.candidates[0];
  CHECK(best.cost_per_million == doctest::Approx(3.6 / (best.output_per_gpu * 3600) * 1e6));
}

TEST_CASE("serving layout search: a larger max_batch than the batch ever reached is not run again") {
  // 24 requests of 8 tokens at 200/s: a few run at once, never 16, with the pool nearly empty.
  ServeSearchSpace space;
  space.gpus = 1;
  space.max_batch = {32, 16};  // run smallest first whatever the order given
  space.chunk = {0};
  const ServeSearchResult r = search(traffic(), space);
  REQUIRE(r.candidates.size() == 2);
  CHECK(r.priced == 1);
  CHECK(r.candidates[0].max_batch == 16);
  CHECK(r.candidates[0].priced);
  CHECK(r.candidates[1].max_batch == 32);
  CHECK(r.candidates[1].pruned.rfind("same run as max_batch 16: at most ", 0) == 0);
}

TEST_CASE("serving layout search: engines without room for the KV cache are pruned") {
  Hardware hw = tiny_hardware();
  hw.memory_bytes = 1e4;  // not the weights of one layer
  ServeSearchSpace space;
  space.gpus = 2;
  space.max_batch = {8};
  space.chunk = {0};
  const ServeSearchResult r = search(traffic(), space, hw);
  CHECK(r.priced == 0);
  REQUIRE_FALSE(r.candidates.empty());
  for (const ServeCandidate& c : r.candidates)
    if (c.layout.tp <= 2) CHECK(c.pruned.rfind("does not fit: ", 0) == 0);
}

TEST_CASE("serving layout search: the limiter rule") {
  Slo slo;
  slo.ttft = 1.0;
  slo.tpot = 0.05;
  ServeMetrics m;
  m.requests = m.completed = 100;
  m.slo_attainment = 1;
  m.ttft.count = m.tpot.count = m.queue.count = 100;
  CHECK(serve_limiter(m, slo, 0.99) == ServeLimiter::none);
  CHECK(std::string(describe(ServeLimiter::none)) == "none (meets SLO)");

  // KV pressure first, even when the SLO is met.
  ServeMetrics kv = m;
  kv.preemptions = 3;
  CHECK(serve_limiter(kv, slo, 0.99) == ServeLimiter::kv_memory);
  kv = m;
  kv.kv_utilization_max = 0.985;
  CHECK(serve_limiter(kv, slo, 0.99) == ServeLimiter::kv_memory);
  kv.kv_utilization_max = 0.9;
  kv.rejected = 1;
  CHECK(serve_limiter(kv, slo, 0.99) == ServeLimiter::kv_memory);
  CHECK(std::string(describe(ServeLimiter::kv_memory)) == "KV memory");

  ServeMetrics miss = m;
  miss.slo_attainment = 0.9;
  miss.queue.p99 = 4;  // waits longer than the 1 s TTFT bound before a first step
  miss.ttft.p99 = 5;
  CHECK(serve_limiter(miss, slo, 0.99) == ServeLimiter::queue);
  miss.queue.p99 = 0.2;
  miss.ttft.p99 = 2;     // 2× its bound
  miss.tpot.p99 = 0.06;  // 1.2× its bound
  CHECK(serve_limiter(miss, slo, 0.99) == ServeLimiter::ttft);
  miss.ttft.p99 = 0.9;
  CHECK(serve_limiter(miss, slo, 0.99) == ServeLimiter::tpot);
  // The target decides whether the SLO is met.
  CHECK(serve_limiter(miss, slo, 0.85) == ServeLimiter::none);
}

TEST_CASE("serving layout search: layouts in words") {
  ServeCandidate c;
  c.layout.tp = 8;
  CHECK(layout_words(c) == "TP8");
  c.layout.tp = 2;
  c.layout.dp = 4;
  CHECK(layout_words(c) == "4 × TP2");
  c.layout.dp = 1;
  c.layout.tp = 4;
  c.prefill_engines = 1;
  c.decode_engines = 3;
  CHECK(layout_words(c) == "1P3D × TP4");
  CHECK(c.engines() == 4);
  c = ServeCandidate{};
  c.layout.dp = 2;
  c.layout.tp = 4;
  c.layout.pp = 2;
  CHECK(layout_words(c) == "2 × TP4 × PP2");
}

TEST_CASE("serving layout search: a bad space is refused") {
  ServeSearchSpace space;
  CHECK_THROWS_AS((void)search(traffic(), space), ConfigError);
  space.gpus = 2;
  space.tp = {0};
  CHECK_THROWS_AS((void)search(traffic(), space), ConfigError);
}
