// Engines behind a router on clocks whose steps take known times: a two-replica round robin of
// four requests worked out by hand, and where least-outstanding and prefix-aware routing send a
// request that round robin would not.
#include <doctest/doctest.h>

#include <vector>

#include "core/serve/engine.hpp"
#include "core/serve/metrics.hpp"
#include "core/serve/router.hpp"
#include "serve_test_util.hpp"

using namespace perfsim;
using test::request;

namespace {

// A step lasts 10 ms per token it computes (prefill and decode alike).
class TokenClock final : public StepClock {
 public:
  [[nodiscard]] double now() const override { return m_now; }
  void wait_until(double t) override { m_now = std::max(m_now, t); }
  void run(const EngineStep& step) override { m_now += 0.010 * static_cast<double>(step.tokens()); }

 private:
  double m_now = 0;
};

SchedulerConfig continuous(bool prefix_cache = false) {
  SchedulerConfig c;
  c.kind = SchedulerKind::continuous;
  c.paged = true;
  c.block = 4;
  c.watermark = 0;
  c.prefix_cache = prefix_cache;
  return c;
}

const KvPool pool{256, 4, 1.0};

ReplicasRun run(const std::vector<Request>& reqs, int replicas, RouterPolicy policy, bool prefix_cache = false,
                int in_flight = 1) {
  std::vector<TokenClock> clocks(static_cast<std::size_t>(replicas * in_flight));
  std::vector<StepClock*> ptrs;
  for (TokenClock& c : clocks) ptrs.push_back(&c);
  return run_replicas(reqs, continuous(prefix_cache), pool, 1024, 0, ptrs, policy, in_flight);
}

}  // namespace

TEST_CASE("router: two replicas in round robin halve each step of four requests") {
  // Four prompts of 16 tokens, 2 output tokens each, all at t = 0.
  std::vector<Request> reqs;
  for (int64_t i = 0; i < 4; ++i) reqs.push_back(request(i, 0, 16, 2));
  // One engine: a prefill step of 4 × 16 = 64 tokens (0.64 s) samples every first token, a
  // decode step of 4 tokens (0.04 s) the second: TTFT 0.64 s, E2E 0.68 s.
  const ReplicasRun one = run(reqs, 1, RouterPolicy::round_robin);
  // Two: requests 0 and 2 on replica 0, 1 and 3 on replica 1; each prefills 32 tokens (0.32 s)
  // and decodes 2 (0.02 s): TTFT 0.32 s, E2E 0.34 s.
  const ReplicasRun two = run(reqs, 2, RouterPolicy::round_robin);
  CHECK(two.replica_of == std::vector<int>{0, 1, 0, 1});
  for (int64_t i = 0; i < 4; ++i) {
    const auto k = static_cast<std::size_t>(i);
    CHECK(one.merged.requests[k].first_token == doctest::Approx(0.64));
    CHECK(one.merged.requests[k].finished == doctest::Approx(0.68));
    CHECK(two.merged.requests[k].first_token == doctest::Approx(0.32));
    CHECK(two.merged.requests[k].finished == doctest::Approx(0.34));
  }
  REQUIRE(two.replicas.size() == 2);
  for (const EngineRun& r : two.replicas) {
    CHECK(r.requests.size() == 2);
    CHECK(r.steps.size() == 2);
    CHECK(r.end == doctest::Approx(0.34));
  }
  CHECK(two.merged.steps.size() == 4);
  // Metrics over the merged run count every request once.
  const ServeMetrics m = serve_metrics(two.merged, Slo{});
  CHECK(m.completed == 4);
  CHECK(m.output_tokens == 8);
  CHECK(m.duration == doctest::Approx(0.34));
  // One replica is the single engine.
  const EngineRun single = [&] {
    TokenClock c;
    return run_engine(reqs, continuous(), pool, 1024, 0, c);
  }();
  CHECK(single.end == doctest::Approx(one.merged.end));
}

TEST_CASE("router: least outstanding sends a request to the idle replica round robin would skip") {
  // 0 (200 output tokens) goes to replica 0 and 1 (one token) to replica 1 under both
  // policies; 1 finishes at 0.04 s (its 4-token prefill). At 1 s, 0 is still decoding (its 199
  // decode steps take 1.99 s): round robin sends request 2 to replica 0, least outstanding to
  // the idle replica 1.
  const std::vector<Request> reqs = {request(0, 0, 4, 200), request(1, 0, 4, 1), request(2, 1.0, 4, 1)};
  CHECK(run(reqs, 2, RouterPolicy::round_robin).replica_of == std::vector<int>{0, 1, 0});
  const ReplicasRun lo = run(reqs, 2, RouterPolicy::least_outstanding);
  CHECK(lo.replica_of == std::vector<int>{0, 1, 1});
  // On the idle replica request 2 starts at once: its 4-token prefill ends at 1.04 s.
  CHECK(lo.merged.requests[2].first_token == doctest::Approx(1.04));
}

TEST_CASE("router: prefix-aware routing follows the replica that caches the prompt's prefix") {
  // Two system prompts of 16 tokens (groups 1 and 2), each first seen on its own replica; later
  // requests of each group, arriving after the first ones finished, go where their prefix is
  // cached. Least outstanding sends both to replica 0 (all idle: the lowest index).
  const std::vector<Request> reqs = {request(0, 0, 20, 1, 1, 16), request(1, 0, 20, 1, 2, 16),
                                     request(2, 5.0, 20, 1, 1, 16), request(3, 10.0, 20, 1, 2, 16)};
  const ReplicasRun prefix = run(reqs, 2, RouterPolicy::prefix, true);
  CHECK(prefix.replica_of == std::vector<int>{0, 1, 0, 1});
  CHECK(prefix.merged.requests[3].cached_tokens == 16);
  const ReplicasRun lo = run(reqs, 2, RouterPolicy::least_outstanding, true);
  CHECK(lo.replica_of == std::vector<int>{0, 1, 0, 0});
  CHECK(lo.merged.requests[3].cached_tokens == 0);
}

TEST_CASE("router: a pipelined replica keeps a batch in flight per stage, each on its own engine loop") {
  std::vector<Request> reqs;
  for (int64_t i = 0; i < 4; ++i) reqs.push_back(request(i, 0, 16, 2));
  // One replica of two batches in flight: within it, each request goes to the loop with the
  // fewest outstanding (0, 1, 0, 1): each prefills 32 tokens (0.32 s) and decodes 2 (0.02 s),
  // as two replicas would, but every request is the one replica's.
  const ReplicasRun one = run(reqs, 1, RouterPolicy::round_robin, false, 2);
  CHECK(one.replica_of == std::vector<int>{0, 0, 0, 0});
  CHECK(one.replicas.empty());
  for (const RequestRecord& r : one.merged.requests) {
    CHECK(r.first_token == doctest::Approx(0.32));
    CHECK(r.finished == doctest::Approx(0.34));
  }
  REQUIRE(one.merged.steps.size() == 4);
  for (std::size_t i = 1; i < one.merged.steps.size(); ++i)
    CHECK(one.merged.steps[i - 1].start <= one.merged.steps[i].start);  // in time order
  // Two replicas of two in flight: round robin over the replicas (0, 1, 0, 1), then one request
  // a loop: 16 tokens of prefill (0.16 s) and one decode (0.01 s) each.
  const ReplicasRun two = run(reqs, 2, RouterPolicy::round_robin, false, 2);
  CHECK(two.replica_of == std::vector<int>{0, 1, 0, 1});
  REQUIRE(two.replicas.size() == 2);
  CHECK(two.replicas[0].requests.size() == 2);
  CHECK(two.replicas[0].steps.size() == 4);
  for (const RequestRecord& r : two.merged.requests) CHECK(r.finished == doctest::Approx(0.17));
}

TEST_CASE("router: policy names") {
  RouterPolicy p{};
  CHECK(router_policy_of("least_outstanding", p));
  CHECK(p == RouterPolicy::least_outstanding);
  CHECK(router_policy_of("prefix", p));
  CHECK_FALSE(router_policy_of("random", p));
  CHECK(std::string(name_of(RouterPolicy::round_robin)) == "round_robin");
}
