// The paged KV cache's block manager (Kwon et al. 2023, vLLM): a pool of fixed-size blocks
// handed to sequences as they grow, with a watermark kept free for running sequences, and
// optional prefix caching (vLLM's automatic prefix caching): a full block is named by a hash
// chained over its tokens and every block before it, so two prompts that start alike share
// their leading blocks. A freed block that holds a named prefix stays cached (evictable) until
// the pool needs it, least recently used first.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace perfsim {

// Tokens of a request's prompt as the cache sees them: the first `prefix_tokens` are those of
// shared prefix `prefix_group` (the same in every request of the group); the rest are the
// request's own (shared with no other request).
struct PromptTokens {
  int64_t request = 0;
  int64_t tokens = 0;         // prompt tokens (and, after a preemption, those generated since)
  int64_t prefix_group = -1;  // -1: none
  int64_t prefix_tokens = 0;
};

// ceil(tokens / block): the blocks that hold `tokens` KV rows.
[[nodiscard]] int64_t blocks_for(int64_t tokens, int64_t block);

class KvBlockManager {
 public:
  // `blocks` in the pool of `block` tokens each; `watermark` (a fraction of the pool) stays
  // free when admitting new sequences (vLLM's default 0.01); `prefix_cache` keeps named full
  // blocks for reuse.
  KvBlockManager(int64_t blocks, int64_t block, double watermark, bool prefix_cache);

  [[nodiscard]] int64_t block_size() const { return m_block; }
  [[nodiscard]] int64_t total_blocks() const { return m_total; }
  // Blocks held by sequences (cached-but-unused blocks are not counted).
  [[nodiscard]] int64_t used_blocks() const;
  // Blocks that can be handed out now: free plus evictable cached ones.
  [[nodiscard]] int64_t available_blocks() const;
  // Cached blocks no sequence holds (evictable).
  [[nodiscard]] int64_t cached_blocks() const;

  // How many leading prompt tokens are already cached (whole blocks, at most tokens − 1: the
  // last prompt token is always computed so the step yields logits). 0 without prefix caching.
  [[nodiscard]] int64_t cached_prefix(const PromptTokens& p) const;

  // Admits a sequence: takes its cached prefix blocks and enough new blocks for
  // `tokens_to_hold` tokens in all, if the pool keeps the watermark free after; returns the
  // tokens found cached (≥ 0), or -1 when it cannot be admitted now (nothing changes).
  int64_t admit(const PromptTokens& p, int64_t tokens_to_hold);

  // Grows sequence `request` to hold `tokens` tokens (no watermark: running sequences may use
  // it); false when the pool lacks the blocks (nothing changes: the caller preempts).
  bool grow(int64_t request, int64_t tokens);

  // The sequence's blocks go back: named full blocks stay cached (when prefix caching is on),
  // the rest are free. Call mark_computed first so the blocks its computed tokens filled are
  // named (so a finished prompt's prefix serves later requests).
  void release(int64_t request);

  // Names the full blocks of `request` that `computed` prompt tokens have filled, so later
  // requests can share them (vLLM caches a block once it is full). No-op without caching.
  void mark_computed(int64_t request, int64_t computed);

  [[nodiscard]] int64_t blocks_of(int64_t request) const;
  [[nodiscard]] bool holds(int64_t request) const;

  // For consistency checks: the sequence's block indices in order (empty when not held), and
  // a block's reference count and whether it is named (holds a hash in the cache).
  [[nodiscard]] const std::vector<int64_t>& block_table(int64_t request) const;
  [[nodiscard]] int64_t block_refs(int64_t b) const;
  [[nodiscard]] bool block_named(int64_t b) const;

 private:
  struct Block {
    int64_t refs = 0;
    uint64_t hash = 0;      // 0: unnamed
    int64_t prev = -1;      // neighbours in the evictable list (refs == 0 and named)
    int64_t next = -1;
    bool evictable = false;
  };
  struct Sequence {
    PromptTokens prompt;
    std::vector<int64_t> blocks;
    int64_t hashed = 0;     // leading blocks whose hash is known (named, or a duplicate of one)
    uint64_t chain = 0;     // hash of block hashed − 1 (the seed when none)
  };
  int64_t take_block();     // a free block, else evicts the least recently used cached one
  void drop_ref(int64_t b);
  void lru_push_back(int64_t b);
  void lru_remove(int64_t b);
  // Leading blocks of `p` found cached, at most `limit`; `chain` gets the last hit's hash.
  int64_t cached_hits(const PromptTokens& p, int64_t limit, uint64_t& chain) const;
  [[nodiscard]] int64_t hit_limit(const PromptTokens& p) const;
  [[nodiscard]] uint64_t block_hash(const PromptTokens& p, int64_t index, uint64_t parent) const;

  int64_t m_total, m_block, m_watermark_blocks;
  bool m_prefix_cache;
  std::vector<Block> m_blocks;
  std::vector<int64_t> m_free;
  // Evictable cached blocks, an intrusive list in LRU order (head = oldest): no allocation
  // per release.
  int64_t m_lru_head = -1, m_lru_tail = -1, m_evictable = 0;
  std::unordered_map<uint64_t, int64_t> m_by_hash;  // named block -> its index
  std::unordered_map<int64_t, Sequence> m_seqs;
};

}  // namespace perfsim
