// Layout search: the count of enumerated layouts of a tiny model over 8 GPUs worked out by
// hand, each pruned with its reason, the ranking (fitting first, then tokens/s), a layout that
// does not fit counted, and results that do not depend on the worker threads.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/errors.hpp"
#include "core/parallel/search.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::test_models;

namespace {

Hardware gpu(double memory_bytes = 80e9) {
  Hardware hw;
  hw.name = "test-gpu";
  hw.peak_flops[static_cast<int>(DType::bf16)] = 989e12;
  hw.peak_flops[static_cast<int>(DType::fp32)] = 67e12;
  hw.memory_bytes = memory_bytes;
  hw.memory_bandwidth = 3.35e12;
  hw.nvlink = {450e9, 3e-6};
  hw.infiniband = {50e9, 5e-6};
  hw.gpus_per_node = 8;
  hw.sm_count = 132;
  hw.collective_sms = 16;
  return hw;
}

// 2 layers, 4 heads, 2 KV heads, MLP width 128.
ModelConfig two_layer_llama() { return llama("search-llama", 2, 64, 4, 2, 128, 256, 256); }

Workload train8() {
  Workload w;
  w.phase = Phase::train;
  w.batch = 1;
  w.seq = 128;
  w.grad_accum = 8;  // global batch 8 sequences with dp = 1
  return w;
}

const std::vector<StackStep> bf16 = {{"bf16", {{"bf16", {}}}, ""}};

SearchResult search8(const Hardware& hw, SearchSpace space = {}) {
  space.gpus = 8;
  if (space.threads == 0) space.threads = 1;
  return search_layouts(two_layer_llama(), train8(), bf16, 0, ParallelSpec{}, hw, space);
}

int64_t pruned(const SearchResult& r, PruneReason why) { return r.pruned[static_cast<int>(why)]; }

}  // namespace

TEST_CASE("search: layouts of a tiny model over 8 GPUs, counted by hand") {
  const SearchResult r = search8(gpu());
  // tp ∈ {1,2,4,8}, pp ∈ {1,2} (divisors of 8 up to 2 layers), tp·pp dividing 8; micro-batch
  // ∈ {1,2,4,8}; interleave ∈ {1,2,4} with pp > 1; zero 0-3 with dp > 1; sp on/off with tp > 1:
  //   tp1 pp1 dp8: 4·1·4·1 = 16   tp1 pp2 dp4: 4·3·4·1 = 48   tp2 pp1 dp4: 4·1·4·2 = 32
  //   tp2 pp2 dp2: 4·3·4·2 = 96   tp4 pp1 dp2: 4·1·4·2 = 32   tp4 pp2 dp1: 4·3·1·2 = 24
  //   tp8 pp1 dp1: 4·1·1·2 = 8                                                 total 256
  CHECK(r.enumerated == 256);
  CHECK(r.global_batch == 8);
  // 8 % (mb·dp): dp8 keeps mb 1 (12 pruned), dp4 mb 1-2 (24 + 16), dp2 mb 1-4 (24 + 8).
  CHECK(pruned(r, PruneReason::batch_split) == 84);
  // tp 4 and 8 do not divide 2 KV heads: what is left of them after the batch check.
  CHECK(pruned(r, PruneReason::tp_split) == 56);
  // pp 2 with interleave 2 or 4 needs 4 or 8 chunks of 2 layers.
  CHECK(pruned(r, PruneReason::too_many_chunks) == 64);
  CHECK(pruned(r, PruneReason::uneven_stages) == 0);
  CHECK(pruned(r, PruneReason::invalid_other) == 0);
  // tp1 pp1: 4, tp1 pp2: 8, tp2 pp1: 16, tp2 pp2: 24.
  CHECK(r.evaluated == 52);
  CHECK(r.layouts.size() == 52);
  CHECK(r.fitting == 52);
  CHECK(pruned(r, PruneReason::does_not_fit) == 0);
  int64_t total = r.evaluated - r.fitting;
  for (int i = 0; i < prune_reason_count; ++i)
    if (static_cast<PruneReason>(i) != PruneReason::does_not_fit) total += r.pruned[i];
  CHECK(total + r.fitting == r.enumerated);

  for (const SearchCandidate& c : r.layouts) {
    CAPTURE(describe(c.layout));
    CHECK(c.layout.gpus() == 8);
    CHECK(c.micro_batch * c.grad_accum * c.layout.dp == 8);  // the global batch is kept
    CHECK(c.tokens_per_second > 0);
    CHECK_FALSE(c.recompute);
  }
  // Ranked by tokens/s.
  for (std::size_t i = 1; i < r.layouts.size(); ++i)
    CHECK(r.layouts[i - 1].tokens_per_second >= r.layouts[i].tokens_per_second);
}

TEST_CASE("search: recompute doubles the training layouts; the options narrow the space") {
  SearchSpace space;
  space.search_recompute = true;
  const SearchResult r = search8(gpu(), space);
  CHECK(r.enumerated == 512);
  CHECK(r.evaluated == 104);
  CHECK(std::count_if(r.layouts.begin(), r.layouts.end(), [](const SearchCandidate& c) { return c.recompute; }) == 52);

  SearchSpace narrow;
  narrow.tp = {2};
  narrow.pp = {1};
  narrow.zero = {0};
  narrow.micro_batches = {2};
  const SearchResult n = search8(gpu(), narrow);
  CHECK(n.enumerated == 2);  // sp off and on
  REQUIRE(n.layouts.size() == 2);
  CHECK(n.layouts[0].layout.dp == 4);
  CHECK(n.layouts[0].grad_accum == 1);

  SearchSpace global;
  global.global_batch = 7;  // odd: only dp 1 with micro-batch 1 splits it
  const SearchResult g = search8(gpu(), global);
  for (const SearchCandidate& c : g.layouts) CHECK(c.layout.dp * c.micro_batch == 1);
}

TEST_CASE("search: layouts that do not fit are counted and ranked after those that fit") {
  const SearchResult all = search8(gpu());
  std::vector<double> peaks;
  for (const SearchCandidate& c : all.layouts) peaks.push_back(c.memory_peak);
  std::sort(peaks.begin(), peaks.end());
  const double limit = peaks[peaks.size() / 2];  // about half fit
  const auto over = std::count_if(peaks.begin(), peaks.end(), [&](double p) { return p > limit; });
  REQUIRE(over > 0);

  const SearchResult r = search8(gpu(limit));
  CHECK(r.evaluated == 52);
  CHECK(pruned(r, PruneReason::does_not_fit) == over);
  CHECK(r.fitting == 52 - over);
  // The best layout fits; every fitting one comes before every other.
  REQUIRE_FALSE(r.layouts.empty());
  CHECK(r.layouts.front().fits);
  for (std::size_t i = 0; i < r.layouts.size(); ++i) {
    CHECK(r.layouts[i].fits == (static_cast<int64_t>(i) < r.fitting));
    if (!r.layouts[i].fits) CHECK(r.layouts[i].limiter == Limiter::memory);
  }
  for (std::size_t i = 1; i < static_cast<std::size_t>(r.fitting); ++i)
    CHECK(r.layouts[i - 1].tokens_per_second >= r.layouts[i].tokens_per_second);
}

TEST_CASE("search: the limiter follows its definition") {
  const Hardware hw = gpu();
  const SearchResult r = search8(hw);
  for (const SearchCandidate& c : r.layouts) {
    CAPTURE(describe(c.layout));
    const double headroom = 1 - c.memory_peak / hw.memory_bytes;
    const double biggest = std::max(c.bubble_time, c.exposed_communication);
    Limiter expected = Limiter::compute;
    if (!c.fits || headroom < limiter_share)
      expected = Limiter::memory;
    else if (biggest >= limiter_share * c.step_time)
      expected = c.bubble_time >= c.exposed_communication ? Limiter::bubble : Limiter::communication;
    CHECK(c.limiter == expected);
    if (c.layout.pp == 1) CHECK(c.bubble_time == 0);
  }
}

TEST_CASE("search: two threads give the same ranking as one") {
  SearchSpace one, two;
  one.threads = 1;
  two.threads = 2;
  const SearchResult a = search8(gpu(), one), b = search8(gpu(), two);
  REQUIRE(a.layouts.size() == b.layouts.size());
  for (std::size_t i = 0; i < a.layouts.size(); ++i) {
    CHECK(describe(a.layouts[i].layout) == describe(b.layouts[i].layout));
    CHECK(a.layouts[i].micro_batch == b.layouts[i].micro_batch);
    CHECK(a.layouts[i].tokens_per_second == b.layouts[i].tokens_per_second);
  }
}

TEST_CASE("search: unequal stages are pruned unless asked for; inference keeps one batch per replica") {
  SearchSpace space;
  space.pp = {3};
  space.tp = {1};
  space.interleave = {1};
  space.micro_batches = {1};
  Workload w = train8();
  const ModelConfig m = llama("five", 5, 64, 4, 2, 128, 256, 256);
  space.gpus = 3;
  ParallelSpec base;
  const SearchResult even = search_layouts(m, w, bf16, 0, base, gpu(), space);
  CHECK(even.enumerated == 1);
  CHECK(pruned(even, PruneReason::uneven_stages) == 1);
  space.uneven_pp = true;
  const SearchResult uneven = search_layouts(m, w, bf16, 0, base, gpu(), space);
  CHECK(uneven.evaluated == 1);

  Workload prefill;
  prefill.phase = Phase::prefill;
  prefill.batch = 8;
  prefill.prompt = 128;
  SearchSpace inf;
  inf.gpus = 8;
  inf.threads = 1;
  const SearchResult p = search_layouts(two_layer_llama(), prefill, bf16, 0, base, gpu(), inf);
  // tp1: pp1, pp2; tp2: pp1, pp2 (sp off/on); tp4 pp1, pp2; tp8 pp1 (sp off/on): no micro-batch,
  // interleave or ZeRO dimension for inference.
  CHECK(p.enumerated == 2 + 4 + 4 + 2);
  for (const SearchCandidate& c : p.layouts) {
    CHECK(c.micro_batch * c.layout.dp == 8);
    CHECK(c.layout.zero == 0);
  }
}

TEST_CASE("search: an unusable space is one clear error") {
  SearchSpace space;
  space.gpus = 0;
  CHECK_THROWS_WITH_AS(search_layouts(two_layer_llama(), train8(), bf16, 0, ParallelSpec{}, gpu(), space),
                       "search: gpus must be >= 1 (got 0)", ConfigError);
  space.gpus = 8;
  space.zero = {4};
  CHECK_THROWS_WITH_AS(search_layouts(two_layer_llama(), train8(), bf16, 0, ParallelSpec{}, gpu(), space),
                       "search: zero candidates must be 0-3 (got 4)", ConfigError);
}

TEST_CASE("search: every layout is priced on the hardware's nodes") {
  // hybrid_shard shards within a node (ParallelSpec::shard_ranks): the layouts carry the node
  // size of the hardware they are priced on, whatever the base layout said.
  Hardware hw = gpu();
  hw.gpus_per_node = 4;
  const SearchResult r = search8(hw);
  REQUIRE_FALSE(r.layouts.empty());
  for (const SearchCandidate& c : r.layouts) CHECK(c.layout.node_gpus == 4);
}

TEST_CASE("search: a mixture-of-experts model also tries ep, only where it divides dp") {
  // 8 experts: ep ∈ {1, 2, 4, 8}. On 8 GPUs with tp and pp fixed at 1 (dp = 8), micro-batch 1 and
  // ZeRO-1: every ep divides dp = 8, so 4 layouts priced. With tp = 2 (dp = 4), ep = 8 is pruned.
  ModelConfig m = llama("search-moe", 2, 64, 4, 2, 128, 256, 256);
  m.experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 64;
  SearchSpace space;
  space.gpus = 8;
  space.threads = 1;
  space.tp = {1};
  space.pp = {1};
  space.micro_batches = {1};
  space.zero = {1};
  SearchResult r = search_layouts(m, train8(), bf16, 0, ParallelSpec{}, gpu(), space);
  CHECK(r.enumerated == 4);
  CHECK(r.evaluated == 4);
  CHECK(pruned(r, PruneReason::ep_split) == 0);
  std::vector<int> eps;
  for (const SearchCandidate& c : r.layouts) eps.push_back(c.layout.ep);
  std::sort(eps.begin(), eps.end());
  CHECK(eps == std::vector<int>{1, 2, 4, 8});
  space.tp = {2};
  r = search_layouts(m, train8(), bf16, 0, ParallelSpec{}, gpu(), space);
  CHECK(r.enumerated == 8);  // sp off and on
  CHECK(pruned(r, PruneReason::ep_split) == 2);
  CHECK(r.evaluated == 6);
  // A dense model is searched at ep = 1 only.
  r = search_layouts(two_layer_llama(), train8(), bf16, 0, ParallelSpec{}, gpu(), space);
  CHECK(r.enumerated == 2);
}
