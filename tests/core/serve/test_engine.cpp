// The serving engine on clocks whose steps take known times, against figures worked out by
// hand: queueing theory (M/D/1), a three-request trace through static and continuous batching,
// KV blocks per sequence, prefix-cache hits and a preemption.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/serve/engine.hpp"
#include "core/serve/kv_blocks.hpp"
#include "core/serve/metrics.hpp"
#include "serve_test_util.hpp"

using namespace perfsim;
using test::FixedClock;
using test::request;

namespace {

SchedulerConfig continuous(bool chunked = false) {
  SchedulerConfig c;
  c.kind = SchedulerKind::continuous;
  c.paged = true;
  c.block = 4;
  c.watermark = 0;
  if (chunked) c.chunked_prefill = 1024;
  return c;
}

KvPool pool(int64_t blocks, int64_t block = 4) { return KvPool{blocks, block, 1.0}; }

const RequestRecord& rec(const EngineRun& r, int64_t id) { return r.requests[static_cast<std::size_t>(id)]; }

// A: prompt 4, 3 tokens; B: prompt 4, 1 token (both at 0); C: prompt 4, 2 tokens at 1.5 s.
std::vector<Request> three_requests() {
  return {request(0, 0, 4, 3), request(1, 0, 4, 1), request(2, 1.5, 4, 2)};
}

}  // namespace

TEST_CASE("serve engine: deterministic service with Poisson arrivals waits as M/D/1") {
  // One request at a time (a static batch of one, one output token: one step each) of D = 10 ms
  // at λ = 50/s: ρ = 0.5 and the mean wait in queue is ρ·D / (2(1 − ρ)) = 5 ms (Pollaczek–
  // Khinchine with zero service variance).
  const double d = 0.010, rate = 50;
  std::vector<Request> reqs;
  double t = 0;
  uint64_t state = 12345;
  for (int64_t i = 0; i < 40000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = (static_cast<double>(state >> 11) + 0.5) / 9007199254740992.0;
    t += -std::log(u) / rate;
    reqs.push_back(request(i, t, 8, 1));
  }
  SchedulerConfig c;
  c.kind = SchedulerKind::static_batch;
  c.max_batch = 1;
  FixedClock clock(d);
  const EngineRun run = run_engine(reqs, c, pool(4, 1024), 1024, 0, clock);
  const ServeMetrics m = serve_metrics(run, {});
  CHECK(m.completed == 40000);
  CHECK(m.queue.mean == doctest::Approx(0.005).epsilon(0.05));
  // TTFT = wait + service.
  CHECK(m.ttft.mean == doctest::Approx(0.015).epsilon(0.05));
}

TEST_CASE("serve engine: static batching on three requests, worked by hand") {
  // Steps of 1 s, batches of 2. t0-1 prefill {A, B}: A's and B's first tokens at 1 (B done);
  // t1-2, t2-3 decode A (B is padding): A done at 3. C (arrived 1.5) is then the last request:
  // t3-4 prefill C (first token at 4), t4-5 its second token.
  SchedulerConfig c;
  c.kind = SchedulerKind::static_batch;
  c.max_batch = 2;
  FixedClock clock(1.0);
  const EngineRun run = run_engine(three_requests(), c, pool(8, 64), 64, 0, clock);
  CHECK(rec(run, 0).first_token == 1);
  CHECK(rec(run, 0).finished == 3);
  CHECK(rec(run, 1).finished == 1);
  CHECK(rec(run, 2).first_token == 4);
  CHECK(rec(run, 2).finished == 5);
  REQUIRE(clock.steps.size() == 5);
  CHECK(clock.steps[1].seqs.size() == 2);  // B rides along as padding
  CHECK(clock.steps[1].seqs[1].padding);
  const ServeMetrics m = serve_metrics(run, {});
  CHECK(m.ttft.mean == doctest::Approx((1 + 1 + 2.5) / 3.0));
  CHECK(m.e2e.mean == doctest::Approx((3 + 1 + 3.5) / 3.0));
}

TEST_CASE("serve engine: continuous batching on the same three requests, worked by hand") {
  // Prefills first: t0-1 prefill A and B (B done at 1); t1-2 decode A; C arrived at 1.5, so
  // t2-3 prefills C alone (A stalls); t3-4 decodes A and C, both done at 4.
  FixedClock clock(1.0);
  const EngineRun run = run_engine(three_requests(), continuous(), pool(64), 64, 0, clock);
  CHECK(rec(run, 0).finished == 4);
  CHECK(rec(run, 1).finished == 1);
  CHECK(rec(run, 2).first_token == 3);
  CHECK(rec(run, 2).finished == 4);
  CHECK(serve_metrics(run, {}).e2e.mean == doctest::Approx((4 + 1 + 2.5) / 3.0));

  // With chunked prefill the decode of A and the prompt of C share t2-3: A is done at 3.
  FixedClock mixed(1.0);
  const EngineRun chunked = run_engine(three_requests(), continuous(true), pool(64), 64, 0, mixed);
  CHECK(rec(chunked, 0).finished == 3);
  CHECK(rec(chunked, 2).first_token == 3);
  CHECK(rec(chunked, 2).finished == 4);
  REQUIRE(mixed.steps.size() == 4);
  CHECK(mixed.steps[2].seqs.size() == 2);
  CHECK(mixed.steps[2].tokens() == 1 + 4);
}

TEST_CASE("serve engine: a sequence holds ceil(tokens / block) KV blocks") {
  // Prompt 16, blocks of 16: the prefill holds 1 block; the first decode writes token 17 and
  // takes a second; the next fits it.
  SchedulerConfig c = continuous();
  c.block = 16;
  FixedClock clock(1.0);
  const EngineRun run = run_engine({request(0, 0, 16, 3)}, c, pool(10, 16), 256, 0, clock);
  REQUIRE(run.steps.size() == 3);
  CHECK(run.steps[0].kv_used_blocks == 1);
  CHECK(run.steps[1].kv_used_blocks == blocks_for(17, 16));
  CHECK(run.steps[2].kv_used_blocks == blocks_for(18, 16));
}

TEST_CASE("serve engine: a prefix-cache hit skips exactly the cached blocks' prefill") {
  // Two requests share a 32-token system prompt (blocks of 4: 8 full blocks) in prompts of 42.
  // The second arrives after the first finished: its prefill computes 42 − 32 = 10 tokens.
  SchedulerConfig c = continuous();
  c.prefix_cache = true;
  std::vector<Request> reqs = {request(0, 0, 42, 2), request(1, 10, 42, 2)};
  for (Request& r : reqs) r.prefix_group = 0, r.prefix_tokens = 32;
  FixedClock clock(1.0);
  const EngineRun run = run_engine(reqs, c, pool(64), 256, 0, clock);
  REQUIRE(clock.steps.size() == 4);
  CHECK(clock.steps[0].tokens() == 42);
  CHECK(clock.steps[2].tokens() == 10);
  CHECK(clock.steps[2].seqs[0].position == 32);
  CHECK(rec(run, 1).cached_tokens == 32);
  CHECK(serve_metrics(run, {}).prefix_hit_rate == doctest::Approx(32.0 / 84.0));

  // Without prefix caching the second prompt is computed whole.
  c.prefix_cache = false;
  FixedClock plain(1.0);
  (void)run_engine(reqs, c, pool(64), 256, 0, plain);
  CHECK(plain.steps[2].tokens() == 42);
}

TEST_CASE("serve engine: preemption frees the last admitted request and re-admits it") {
  // Pool: 4 blocks of 4 tokens. A and B (prompt 4, 8 tokens each) start together: 1 block each.
  // Decodes take them to 8 tokens each (2 blocks each, the pool full). At t5 A needs a third
  // block: B, admitted last, is preempted (its 2 blocks freed). A finishes at 8 (3 blocks).
  // B waits for room to recompute its 4 + 5 = 9 tokens (3 blocks): prefill t8-9 (its 6th
  // token), then tokens 7 and 8 at 10 and 11.
  FixedClock clock(1.0);
  const EngineRun run =
      run_engine({request(0, 0, 4, 8), request(1, 0, 4, 8)}, continuous(), pool(4), 64, 0, clock);
  CHECK(run.preemptions == 1);
  CHECK(rec(run, 0).preemptions == 0);
  CHECK(rec(run, 1).preemptions == 1);
  CHECK(rec(run, 0).finished == 8);
  CHECK(rec(run, 1).finished == 11);
  CHECK(rec(run, 1).generated == 8);
  CHECK(clock.steps[8].tokens() == 9);  // B's recompute
  // B's gap across its preemption: its 5th token at 5, its 6th at 9.
  const ServeMetrics m = serve_metrics(run, {});
  CHECK(m.itl.max == doctest::Approx(4.0));
}

TEST_CASE("serve engine: requests that cannot fit are refused and the run goes on") {
  SchedulerConfig c = continuous();
  FixedClock clock(1.0);
  // max_seq 64: 60 + 10 is too long; the pool of 4 blocks of 4 holds 16 tokens: 12 + 8 is too big.
  const EngineRun run = run_engine({request(0, 0, 60, 10), request(1, 0, 12, 8), request(2, 0, 4, 2)}, c, pool(4),
                                   64, 0, clock);
  CHECK(rec(run, 0).rejected.find("max_seq") != std::string::npos);
  CHECK(rec(run, 1).rejected.find("KV blocks") != std::string::npos);
  CHECK(rec(run, 2).rejected.empty());
  CHECK(rec(run, 2).finished == 2);
  const ServeMetrics m = serve_metrics(run, {});
  CHECK(m.rejected == 2);
  CHECK(m.completed == 1);
}

TEST_CASE("serve engine: closed-loop users send their next request when the last one ends") {
  // Two users, think 0.5 s, one-step requests of 1 s (one token): user 0 sends requests 0, 2;
  // user 1 sends 1, 3. Both first requests run together t0-1; the next arrive at 1.5.
  SchedulerConfig c = continuous();
  std::vector<Request> reqs;
  for (int64_t i = 0; i < 4; ++i) {
    reqs.push_back(request(i, 0, 4, 1));
    reqs.back().user = static_cast<int>(i % 2);
  }
  FixedClock clock(1.0);
  const EngineRun run = run_engine(reqs, c, pool(16), 64, 0.5, clock);
  CHECK(rec(run, 2).request.arrival == 1.5);
  CHECK(rec(run, 3).request.arrival == 1.5);
  CHECK(rec(run, 3).finished == 2.5);
}

TEST_CASE("serve engine: a static batch holds only as many padded requests as the pool fits") {
  // Pool of 8 blocks of 4 tokens. A (prompt 4, 2 tokens) and B (prompt 20, 8 tokens) wait
  // together: padded, each would hold 20 + 8 = 28 tokens (7 blocks), 14 for both: B waits for
  // the next batch. Alone, A holds 6 tokens (2 blocks).
  SchedulerConfig c;
  c.kind = SchedulerKind::static_batch;
  c.max_batch = 2;
  c.paged = true;
  c.block = 4;
  c.watermark = 0;
  FixedClock clock(1.0);
  const EngineRun run = run_engine({request(0, 0, 4, 2), request(1, 0, 20, 8)}, c, pool(8), 64, 0, clock);
  CHECK(rec(run, 0).finished == 2);
  CHECK(rec(run, 1).first_token == 3);
  CHECK(rec(run, 1).finished == 10);
  CHECK(rec(run, 1).rejected.empty());
}
