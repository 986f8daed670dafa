// KvBlockManager: block counts, the admission watermark, growth, release, prefix caching with
// shared and LRU-evicted blocks, and a randomized check of its bookkeeping.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "core/serve/kv_blocks.hpp"

using namespace perfsim;

namespace {

PromptTokens prompt(int64_t request, int64_t tokens, int64_t group = -1, int64_t prefix = 0) {
  PromptTokens p;
  p.request = request;
  p.tokens = tokens;
  p.prefix_group = group;
  p.prefix_tokens = prefix;
  return p;
}

// Every block is either held or available, never both.
void check_totals(const KvBlockManager& kv) {
  CHECK(kv.used_blocks() + kv.available_blocks() == kv.total_blocks());
  CHECK(kv.cached_blocks() <= kv.available_blocks());
}

}  // namespace

TEST_CASE("kv_blocks: blocks_for rounds up") {
  CHECK(blocks_for(0, 16) == 0);
  CHECK(blocks_for(1, 16) == 1);
  CHECK(blocks_for(16, 16) == 1);
  CHECK(blocks_for(17, 16) == 2);
  CHECK_THROWS_AS((void)blocks_for(1, 0), std::invalid_argument);
  CHECK_THROWS_AS((void)blocks_for(-1, 16), std::invalid_argument);
}

TEST_CASE("kv_blocks: invalid arguments and misuse") {
  CHECK_THROWS_AS(KvBlockManager(0, 16, 0.0, true), std::invalid_argument);
  CHECK_THROWS_AS(KvBlockManager(10, 0, 0.0, true), std::invalid_argument);
  CHECK_THROWS_AS(KvBlockManager(10, 16, -0.1, true), std::invalid_argument);
  CHECK_THROWS_AS(KvBlockManager(10, 16, 1.0, true), std::invalid_argument);
  KvBlockManager kv(10, 16, 0.0, true);
  CHECK(kv.admit(prompt(1, 20), 20) == 0);
  CHECK_THROWS_AS(kv.admit(prompt(1, 20), 20), std::logic_error);  // already held
  CHECK_THROWS_AS(kv.grow(2, 20), std::logic_error);
  CHECK_THROWS_AS(kv.release(2), std::logic_error);
  CHECK_THROWS_AS(kv.mark_computed(2, 20), std::logic_error);
  CHECK(kv.blocks_of(2) == 0);
  CHECK_FALSE(kv.holds(2));
}

TEST_CASE("kv_blocks: admission respects the watermark") {
  // 100 blocks, watermark 0.05: floor(0.05 · 100) = 5 blocks stay free at admission, so a
  // request needing 96 blocks (96 · 16 tokens) is refused and one needing 95 is admitted.
  KvBlockManager kv(100, 16, 0.05, false);
  CHECK(kv.admit(prompt(1, 96 * 16), 96 * 16) == -1);
  CHECK_FALSE(kv.holds(1));
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.available_blocks() == 100);
  CHECK(kv.admit(prompt(2, 95 * 16), 95 * 16) == 0);
  CHECK(kv.blocks_of(2) == 95);
  CHECK(kv.used_blocks() == 95);
  CHECK(kv.available_blocks() == 5);
  // Even one more block would dip into the watermark.
  CHECK(kv.admit(prompt(3, 1), 1) == -1);
  CHECK_FALSE(kv.holds(3));
  check_totals(kv);
}

TEST_CASE("kv_blocks: grow ignores the watermark but fails when the pool is empty") {
  // 100 blocks, 5 kept back at admission: 95 admitted, then growth takes the last 5 (100 · 16
  // tokens); one more token needs a 101st block, which fails and leaves 100 held.
  KvBlockManager kv(100, 16, 0.05, false);
  REQUIRE(kv.admit(prompt(1, 95 * 16), 95 * 16) == 0);
  CHECK(kv.grow(1, 95 * 16));  // already held: nothing to add
  CHECK(kv.blocks_of(1) == 95);
  CHECK(kv.grow(1, 100 * 16));
  CHECK(kv.blocks_of(1) == 100);
  CHECK(kv.available_blocks() == 0);
  CHECK_FALSE(kv.grow(1, 100 * 16 + 1));
  CHECK(kv.blocks_of(1) == 100);
  CHECK(kv.used_blocks() == 100);
  CHECK(kv.available_blocks() == 0);
  check_totals(kv);
}

TEST_CASE("kv_blocks: a failed grow takes no blocks, even when some are left") {
  // 10 blocks of 16: request 1 holds 8 (128 tokens); growing to 11 blocks (161 tokens) needs 3
  // more but 2 are left: refused, still 8 held and 2 available.
  KvBlockManager kv(10, 16, 0.0, false);
  REQUIRE(kv.admit(prompt(1, 128), 128) == 0);
  CHECK_FALSE(kv.grow(1, 161));
  CHECK(kv.blocks_of(1) == 8);
  CHECK(kv.available_blocks() == 2);
  CHECK(kv.grow(1, 160));
  CHECK(kv.blocks_of(1) == 10);
}

TEST_CASE("kv_blocks: release returns blocks and the totals add up") {
  // 10 blocks of 16: request 1 takes 3 (40 tokens), request 2 takes 4 (64 tokens), request 1
  // grows to 5 (80 tokens): 9 used, 1 available; releases bring everything back.
  KvBlockManager kv(10, 16, 0.0, false);
  check_totals(kv);
  REQUIRE(kv.admit(prompt(1, 40), 40) == 0);
  CHECK(kv.used_blocks() == 3);
  check_totals(kv);
  REQUIRE(kv.admit(prompt(2, 64), 64) == 0);
  CHECK(kv.used_blocks() == 7);
  check_totals(kv);
  REQUIRE(kv.grow(1, 80));
  CHECK(kv.used_blocks() == 9);
  CHECK(kv.available_blocks() == 1);
  check_totals(kv);
  kv.release(1);
  CHECK_FALSE(kv.holds(1));
  CHECK(kv.used_blocks() == 4);
  CHECK(kv.available_blocks() == 6);
  check_totals(kv);
  kv.release(2);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.available_blocks() == 10);
  CHECK(kv.cached_blocks() == 0);  // nothing was marked computed, so nothing is named
  check_totals(kv);
}

TEST_CASE("kv_blocks: a released prefix serves later requests of its group") {
  // B = 16, group 7 with a 64-token prefix (4 blocks), prompts of 100 tokens (7 blocks, 6 full).
  // Request 1 computed and released: its 6 full blocks stay cached (4 prefix + 2 of its own),
  // its partial 7th block is free.
  KvBlockManager kv(64, 16, 0.0, true);
  REQUIRE(kv.admit(prompt(1, 100, 7, 64), 100) == 0);
  CHECK(kv.blocks_of(1) == 7);
  kv.mark_computed(1, 100);
  kv.release(1);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.cached_blocks() == 6);
  CHECK(kv.available_blocks() == 64);

  // Request 2 of group 7 finds the 4 prefix blocks (64 tokens); its own blocks differ. Holding
  // 100 + 20 tokens needs blocks_for(120) = 8 blocks: 4 reused and 4 new.
  const PromptTokens p2 = prompt(2, 100, 7, 64);
  CHECK(kv.cached_prefix(p2) == 64);
  CHECK(kv.admit(p2, 120) == 64);
  CHECK(kv.blocks_of(2) == 8);
  CHECK(kv.used_blocks() == 8);
  CHECK(kv.cached_blocks() == 2);  // request 1's own 2 full blocks
  CHECK(kv.available_blocks() == 56);
  check_totals(kv);

  // Another group, or none, shares nothing.
  CHECK(kv.cached_prefix(prompt(3, 100, 8, 64)) == 0);
  CHECK(kv.cached_prefix(prompt(3, 100)) == 0);
  // A prompt that is the 64-token prefix alone: its last token is always computed, so at most
  // floor(63 / 16) = 3 blocks (48 tokens) count as cached.
  const PromptTokens p4 = prompt(4, 64, 7, 64);
  CHECK(kv.cached_prefix(p4) == 48);
  CHECK(kv.admit(p4, 64) == 48);
  CHECK(kv.blocks_of(4) == 4);  // 3 reused + 1 new
  CHECK(kv.used_blocks() == 9);
  check_totals(kv);
}

TEST_CASE("kv_blocks: running requests of a group share their prefix blocks") {
  // B = 16, 64-token prefix, 100-token prompts: request 1 holds 7 blocks and has computed its
  // prompt; request 2 reuses its 4 prefix blocks and adds 3: 7 + 3 = 10 used, not 14.
  KvBlockManager kv(64, 16, 0.0, true);
  REQUIRE(kv.admit(prompt(1, 100, 7, 64), 100) == 0);
  kv.mark_computed(1, 100);
  CHECK(kv.admit(prompt(2, 100, 7, 64), 100) == 64);
  CHECK(kv.used_blocks() == 10);
  const std::vector<int64_t>& a = kv.block_table(1);
  const std::vector<int64_t>& b = kv.block_table(2);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(a[i] == b[i]);
    CHECK(kv.block_refs(a[i]) == 2);
    CHECK(kv.block_named(a[i]));
  }
  CHECK(a[4] != b[4]);
  check_totals(kv);

  // Request 1 leaves: the shared 4 stay held by request 2; its own 2 named blocks are cached
  // and its partial block is free.
  kv.release(1);
  CHECK(kv.used_blocks() == 7);
  CHECK(kv.cached_blocks() == 2);
  CHECK(kv.block_refs(b[0]) == 1);
  // Request 2 never marked its own blocks, so only the prefix blocks stay cached: 2 + 4 = 6.
  kv.release(2);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.cached_blocks() == 6);
  check_totals(kv);
}

TEST_CASE("kv_blocks: a block computed twice stays cached once") {
  // Both requests are admitted before either computes: each holds its own copy of the prefix.
  // The first to finish names its 4 prefix blocks; the second's copies stay unnamed and are
  // freed on release. B = 16, 64-token prefix, 64-token prompts: 4 blocks each, all full.
  KvBlockManager kv(16, 16, 0.0, true);
  REQUIRE(kv.admit(prompt(1, 64, 3, 64), 64) == 0);
  REQUIRE(kv.admit(prompt(2, 64, 3, 64), 64) == 0);
  kv.mark_computed(1, 64);
  kv.mark_computed(2, 64);
  for (int64_t blk : kv.block_table(1)) CHECK(kv.block_named(blk));
  for (int64_t blk : kv.block_table(2)) CHECK_FALSE(kv.block_named(blk));
  kv.release(1);
  kv.release(2);
  CHECK(kv.cached_blocks() == 4);
  CHECK(kv.cached_prefix(prompt(5, 80, 3, 64)) == 64);
  check_totals(kv);
}

TEST_CASE("kv_blocks: cached blocks are evicted least recently used first") {
  // 8 blocks of 16, own prompts of 32 tokens (2 full blocks). Requests 1 then 2 are computed
  // and released; release pushes tail blocks first, so the LRU order is
  // r1b1, r1b0, r2b1, r2b0 (oldest first), with 4 blocks free.
  KvBlockManager kv(8, 16, 0.0, true);
  for (int64_t r : {1, 2}) {
    REQUIRE(kv.admit(prompt(r, 32), 32) == 0);
    kv.mark_computed(r, 32);
    kv.release(r);
  }
  CHECK(kv.cached_blocks() == 4);
  CHECK(kv.available_blocks() == 8);
  // A 48-token prompt of request 1 would find both blocks (limit floor(47 / 16) = 2).
  CHECK(kv.cached_prefix(prompt(1, 48)) == 32);

  // Request 3 needs 5 blocks: the 4 free ones, then r1b1 (the oldest) is evicted.
  REQUIRE(kv.admit(prompt(3, 80), 80) == 0);
  CHECK(kv.cached_blocks() == 3);
  CHECK(kv.cached_prefix(prompt(1, 48)) == 16);  // block 0 still hits, block 1 is gone
  CHECK(kv.cached_prefix(prompt(2, 48)) == 32);

  // Request 4 needs 2 more: r1b0 and r2b1 go; only r2b0 remains.
  REQUIRE(kv.admit(prompt(4, 32), 32) == 0);
  CHECK(kv.cached_blocks() == 1);
  CHECK(kv.cached_prefix(prompt(1, 48)) == 0);
  CHECK(kv.cached_prefix(prompt(2, 48)) == 16);
  CHECK(kv.used_blocks() == 7);
  check_totals(kv);
}

TEST_CASE("kv_blocks: a cached hit taken out of the LRU list is no room for new blocks") {
  // 6 blocks of 16, no watermark. Request 1 (group 0, 64-token prefix, 64-token prompt)
  // leaves its 4 blocks cached; 2 are free. Request 2 of the group (80 tokens) reuses the 4
  // and needs blocks_for(80) − 4 = 1 new: admitted. Request 3 (own, 48 tokens) needs 3 but
  // only 1 is left: refused, though before the reuse 6 would have looked available.
  KvBlockManager kv(6, 16, 0.0, true);
  REQUIRE(kv.admit(prompt(1, 64, 0, 64), 64) == 0);
  kv.mark_computed(1, 64);
  kv.release(1);
  CHECK(kv.available_blocks() == 6);
  // Holding 112 tokens would need 7 blocks: 4 reused + 3 new, but only the 2 free ones count.
  CHECK(kv.admit(prompt(9, 96, 0, 64), 112) == -1);
  CHECK(kv.cached_blocks() == 4);
  CHECK(kv.admit(prompt(2, 80, 0, 64), 80) == 64);
  CHECK(kv.blocks_of(2) == 5);
  CHECK(kv.available_blocks() == 1);
  CHECK(kv.admit(prompt(3, 48), 48) == -1);
  CHECK(kv.used_blocks() == 5);
  check_totals(kv);
}

TEST_CASE("kv_blocks: without prefix caching nothing is cached") {
  // B = 16, 100-token prompts of one group: even after request 1 computed and left, request 2
  // finds nothing and all 7 blocks went back free.
  KvBlockManager kv(16, 16, 0.0, false);
  REQUIRE(kv.admit(prompt(1, 100, 7, 64), 100) == 0);
  kv.mark_computed(1, 100);
  kv.release(1);
  CHECK(kv.cached_blocks() == 0);
  CHECK(kv.available_blocks() == 16);
  const PromptTokens p2 = prompt(2, 100, 7, 64);
  CHECK(kv.cached_prefix(p2) == 0);
  CHECK(kv.admit(p2, 100) == 0);
  CHECK(kv.blocks_of(2) == 7);
  for (int64_t blk : kv.block_table(2)) CHECK_FALSE(kv.block_named(blk));
}

TEST_CASE("kv_blocks: a preempted request finds its own computed blocks again") {
  // B = 16, an own 40-token prompt: 3 blocks, 2 of them full and named once computed. It
  // generates 30 tokens (70 held: 5 blocks; generated tokens are not named) and is preempted.
  // Readmitted with 70 tokens (prompt + generated), its 2 named blocks hit (32 tokens) and
  // blocks_for(70) − 2 = 3 are new.
  KvBlockManager kv(32, 16, 0.0, true);
  REQUIRE(kv.admit(prompt(5, 40), 40) == 0);
  kv.mark_computed(5, 40);
  REQUIRE(kv.grow(5, 70));
  CHECK(kv.blocks_of(5) == 5);
  const std::vector<int64_t> before = kv.block_table(5);
  kv.release(5);
  CHECK(kv.cached_blocks() == 2);

  const PromptTokens again = prompt(5, 70);
  CHECK(kv.cached_prefix(again) == 32);
  CHECK(kv.admit(again, 70) == 32);
  CHECK(kv.blocks_of(5) == 5);
  CHECK(kv.block_table(5)[0] == before[0]);
  CHECK(kv.block_table(5)[1] == before[1]);
  CHECK(kv.cached_blocks() == 0);
  // Recomputing the 70 tokens names 4 full blocks; after release a 70-token readmission
  // would find them all: min(4 · 16, floor(69 / 16) · 16) = 64.
  kv.mark_computed(5, 70);
  kv.release(5);
  CHECK(kv.cached_blocks() == 4);
  CHECK(kv.cached_prefix(again) == 64);
  check_totals(kv);
}

TEST_CASE("kv_blocks: randomized operations keep the bookkeeping consistent") {
  // 2,000 random admits, grows, marks and releases (some releases readmit later with their
  // generated tokens, as after a preemption) on a small pool; after each, every block is held
  // or available, a block held by several sequences is a named shared one, and each block's
  // reference count is the number of sequences holding it.
  const int64_t total = 40, B = 4;
  KvBlockManager kv(total, B, 0.05, true);
  std::mt19937 rng(12345);
  auto draw = [&](uint32_t n) { return static_cast<int64_t>(rng() % n); };

  std::map<int64_t, PromptTokens> live;  // request -> its prompt
  std::map<int64_t, int64_t> held;       // request -> tokens it should hold
  std::vector<PromptTokens> parked;      // released ones that may come back
  int64_t next_id = 0;
  int admitted = 0, refused = 0, hits = 0;

  auto pick_live = [&]() {
    auto it = live.begin();
    std::advance(it, draw(static_cast<uint32_t>(live.size())));
    return it->first;
  };

  for (int step = 0; step < 2000; ++step) {
    const int64_t op = draw(10);
    if (op < 4 || live.empty()) {
      PromptTokens p;
      if (!parked.empty() && draw(3) == 0) {
        const size_t k = static_cast<size_t>(draw(static_cast<uint32_t>(parked.size())));
        p = parked[k];
        parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(k));
        p.tokens += draw(10);  // what it generated before it left
      } else {
        p.request = next_id++;
        p.tokens = 1 + draw(40);
        if (draw(2) == 0) {
          p.prefix_group = draw(3);
          p.prefix_tokens = std::min<int64_t>(p.tokens, 4 * (1 + p.prefix_group) + 2);
        }
      }
      const int64_t hold = p.tokens + draw(6);
      const int64_t cached = kv.cached_prefix(p);
      const int64_t used = kv.used_blocks(), avail = kv.available_blocks();
      const int64_t r = kv.admit(p, hold);
      if (r >= 0) {
        CHECK(r == cached);
        CHECK(kv.blocks_of(p.request) == blocks_for(hold, B));
        live[p.request] = p;
        held[p.request] = hold;
        ++admitted;
        hits += r > 0;
      } else {
        CHECK_FALSE(kv.holds(p.request));
        CHECK(kv.used_blocks() == used);
        CHECK(kv.available_blocks() == avail);
        parked.push_back(p);
        ++refused;
      }
    } else if (op < 6) {
      const int64_t id = pick_live();
      const int64_t want = held[id] + draw(12);
      const int64_t before = kv.blocks_of(id);
      if (kv.grow(id, want)) {
        held[id] = want;
        CHECK(kv.blocks_of(id) == std::max(before, blocks_for(want, B)));
      } else {
        CHECK(kv.blocks_of(id) == before);
      }
    } else if (op < 8) {
      const int64_t id = pick_live();
      kv.mark_computed(id, draw(static_cast<uint32_t>(live[id].tokens + 5)));
    } else {
      const int64_t id = pick_live();
      kv.mark_computed(id, held[id]);
      kv.release(id);
      CHECK_FALSE(kv.holds(id));
      PromptTokens p = live[id];
      p.tokens = held[id];  // readmitted with prompt + generated
      parked.push_back(p);
      live.erase(id);
      held.erase(id);
    }

    // Invariants.
    REQUIRE(kv.used_blocks() + kv.available_blocks() == total);
    std::map<int64_t, int64_t> holders;  // block -> sequences holding it
    for (const auto& entry : live) {
      const int64_t id = entry.first;  // a plain local: doctest's macros capture it
      const std::vector<int64_t>& table = kv.block_table(id);
      CHECK(static_cast<int64_t>(table.size()) == kv.blocks_of(id));
      std::set<int64_t> seen(table.begin(), table.end());
      CHECK(seen.size() == table.size());  // no block twice in one sequence
      for (int64_t blk : table) ++holders[blk];
    }
    CHECK(static_cast<int64_t>(holders.size()) == kv.used_blocks());
    int64_t evictable = 0;
    for (int64_t blk = 0; blk < total; ++blk) {
      auto it = holders.find(blk);
      const int64_t n = it == holders.end() ? 0 : it->second;
      CHECK(kv.block_refs(blk) == n);
      if (n > 1) CHECK(kv.block_named(blk));
      if (n == 0 && kv.block_named(blk)) ++evictable;
    }
    CHECK(kv.cached_blocks() == evictable);
  }
  // The run exercised both outcomes and the cache.
  CHECK(admitted > 100);
  CHECK(refused > 0);
  CHECK(hits > 0);
}
