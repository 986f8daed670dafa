#include "core/serve/kv_blocks.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace perfsim {

namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t kChainSeed = 0x243F6A8885A308D3ull;
// Distinct tags keep a group's prefix block from ever equalling a request's own block.
constexpr uint64_t kPrefixTag = 0x13198A2E03707344ull;
constexpr uint64_t kOwnTag = 0xA4093822299F31D0ull;

[[noreturn]] void unknown(const char* what, int64_t request) {
  throw std::logic_error(std::string("KvBlockManager::") + what + ": request " +
                         std::to_string(request) + " holds no blocks");
}

}  // namespace

int64_t blocks_for(int64_t tokens, int64_t block) {
  if (block <= 0) throw std::invalid_argument("blocks_for: block size must be positive");
  if (tokens < 0) throw std::invalid_argument("blocks_for: negative token count");
  return (tokens + block - 1) / block;
}

KvBlockManager::KvBlockManager(int64_t blocks, int64_t block, double watermark, bool prefix_cache)
    : m_total(blocks), m_block(block), m_watermark_blocks(0), m_prefix_cache(prefix_cache) {
  if (blocks < 1) throw std::invalid_argument("KvBlockManager: the pool needs at least one block");
  if (block < 1) throw std::invalid_argument("KvBlockManager: block size must be positive");
  if (!(watermark >= 0.0 && watermark < 1.0))
    throw std::invalid_argument("KvBlockManager: watermark must be in [0, 1)");
  // vLLM: int(watermark * num_gpu_blocks).
  m_watermark_blocks = static_cast<int64_t>(watermark * static_cast<double>(blocks));
  m_blocks.resize(static_cast<size_t>(blocks));
  m_free.reserve(static_cast<size_t>(blocks));
  // A stack: block 0 is handed out first.
  for (int64_t b = blocks - 1; b >= 0; --b) m_free.push_back(b);
}

int64_t KvBlockManager::used_blocks() const {
  return m_total - static_cast<int64_t>(m_free.size()) - m_evictable;
}

int64_t KvBlockManager::available_blocks() const {
  return static_cast<int64_t>(m_free.size()) + m_evictable;
}

int64_t KvBlockManager::cached_blocks() const { return m_evictable; }

uint64_t KvBlockManager::block_hash(const PromptTokens& p, int64_t index, uint64_t parent) const {
  const bool prefix = p.prefix_group >= 0 && (index + 1) * m_block <= p.prefix_tokens;
  const uint64_t tag = prefix ? kPrefixTag : kOwnTag;
  const uint64_t owner = static_cast<uint64_t>(prefix ? p.prefix_group : p.request);
  uint64_t content = mix64(tag ^ mix64(owner ^ mix64(static_cast<uint64_t>(index))));
  uint64_t h = mix64(parent ^ content);
  return h == 0 ? 1 : h;  // 0 means unnamed
}

// vLLM computes at least the last prompt token, so at most floor((tokens − 1) / B) blocks hit.
int64_t KvBlockManager::hit_limit(const PromptTokens& p) const {
  if (!m_prefix_cache || p.tokens <= 0) return 0;
  return (p.tokens - 1) / m_block;
}

int64_t KvBlockManager::cached_hits(const PromptTokens& p, int64_t limit, uint64_t& chain) const {
  chain = kChainSeed;
  int64_t hits = 0;
  while (hits < limit) {
    const uint64_t h = block_hash(p, hits, chain);
    if (m_by_hash.find(h) == m_by_hash.end()) break;
    chain = h;
    ++hits;
  }
  return hits;
}

int64_t KvBlockManager::cached_prefix(const PromptTokens& p) const {
  uint64_t chain = 0;
  return cached_hits(p, hit_limit(p), chain) * m_block;
}

void KvBlockManager::lru_push_back(int64_t b) {
  Block& k = m_blocks[static_cast<size_t>(b)];
  k.prev = m_lru_tail;
  k.next = -1;
  k.evictable = true;
  if (m_lru_tail >= 0)
    m_blocks[static_cast<size_t>(m_lru_tail)].next = b;
  else
    m_lru_head = b;
  m_lru_tail = b;
  ++m_evictable;
}

void KvBlockManager::lru_remove(int64_t b) {
  Block& k = m_blocks[static_cast<size_t>(b)];
  if (k.prev >= 0)
    m_blocks[static_cast<size_t>(k.prev)].next = k.next;
  else
    m_lru_head = k.next;
  if (k.next >= 0)
    m_blocks[static_cast<size_t>(k.next)].prev = k.prev;
  else
    m_lru_tail = k.prev;
  k.prev = k.next = -1;
  k.evictable = false;
  --m_evictable;
}

int64_t KvBlockManager::take_block() {
  int64_t b;
  if (!m_free.empty()) {
    b = m_free.back();
    m_free.pop_back();
  } else {
    if (m_lru_head < 0) throw std::logic_error("KvBlockManager: pool exhausted");
    b = m_lru_head;
    lru_remove(b);
    Block& k = m_blocks[static_cast<size_t>(b)];
    m_by_hash.erase(k.hash);
    k.hash = 0;
  }
  m_blocks[static_cast<size_t>(b)].refs = 1;
  return b;
}

void KvBlockManager::drop_ref(int64_t b) {
  Block& k = m_blocks[static_cast<size_t>(b)];
  if (--k.refs > 0) return;
  if (m_prefix_cache && k.hash != 0)
    lru_push_back(b);
  else
    m_free.push_back(b);
}

int64_t KvBlockManager::admit(const PromptTokens& p, int64_t tokens_to_hold) {
  if (m_seqs.count(p.request) != 0)
    throw std::logic_error("KvBlockManager::admit: request " + std::to_string(p.request) +
                           " is already admitted");
  const int64_t want = blocks_for(tokens_to_hold, m_block);
  std::vector<int64_t> blocks;
  blocks.reserve(static_cast<size_t>(want));
  // The cached hits, walked once; a hit that nobody holds stops being evictable once taken,
  // so it no longer counts as room for the new blocks.
  uint64_t chain = kChainSeed;
  int64_t evictable_hits = 0;
  for (int64_t i = 0, limit = hit_limit(p); i < limit; ++i) {
    const uint64_t h = block_hash(p, i, chain);
    auto hit = m_by_hash.find(h);
    if (hit == m_by_hash.end()) break;
    chain = h;
    blocks.push_back(hit->second);
    if (m_blocks[static_cast<size_t>(hit->second)].refs == 0) ++evictable_hits;
  }
  const int64_t hits = static_cast<int64_t>(blocks.size());
  if (tokens_to_hold < hits * m_block)
    throw std::logic_error("KvBlockManager::admit: fewer tokens to hold than are cached");
  const int64_t fresh = want - hits;
  if (fresh > available_blocks() - evictable_hits - m_watermark_blocks) return -1;

  for (int64_t b : blocks) {
    Block& k = m_blocks[static_cast<size_t>(b)];
    if (k.refs++ == 0) lru_remove(b);
  }
  for (int64_t i = 0; i < fresh; ++i) blocks.push_back(take_block());

  Sequence& s = m_seqs[p.request];
  s.prompt = p;
  s.blocks = std::move(blocks);
  s.hashed = hits;
  s.chain = chain;
  return hits * m_block;
}

bool KvBlockManager::grow(int64_t request, int64_t tokens) {
  auto it = m_seqs.find(request);
  if (it == m_seqs.end()) unknown("grow", request);
  Sequence& s = it->second;
  const int64_t more = blocks_for(tokens, m_block) - static_cast<int64_t>(s.blocks.size());
  if (more <= 0) return true;
  if (more > available_blocks()) return false;
  for (int64_t i = 0; i < more; ++i) s.blocks.push_back(take_block());
  return true;
}

void KvBlockManager::release(int64_t request) {
  auto it = m_seqs.find(request);
  if (it == m_seqs.end()) unknown("release", request);
  // Reverse order: the tail blocks become the oldest cached ones and are evicted first.
  const std::vector<int64_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) drop_ref(*b);
  m_seqs.erase(it);
}

void KvBlockManager::mark_computed(int64_t request, int64_t computed) {
  auto it = m_seqs.find(request);
  if (it == m_seqs.end()) unknown("mark_computed", request);
  if (!m_prefix_cache) return;
  Sequence& s = it->second;
  // Only prompt tokens are named: generated ones are never shared.
  const int64_t full = std::min<int64_t>(std::min(computed, s.prompt.tokens) / m_block,
                                         static_cast<int64_t>(s.blocks.size()));
  for (; s.hashed < full; ++s.hashed) {
    s.chain = block_hash(s.prompt, s.hashed, s.chain);
    const int64_t b = s.blocks[static_cast<size_t>(s.hashed)];
    Block& k = m_blocks[static_cast<size_t>(b)];
    // An equal block already cached keeps its name; this one stays unnamed and is freed
    // on release.
    if (k.hash == 0 && m_by_hash.emplace(s.chain, b).second) k.hash = s.chain;
  }
}

int64_t KvBlockManager::blocks_of(int64_t request) const {
  auto it = m_seqs.find(request);
  return it == m_seqs.end() ? 0 : static_cast<int64_t>(it->second.blocks.size());
}

bool KvBlockManager::holds(int64_t request) const { return m_seqs.count(request) != 0; }

const std::vector<int64_t>& KvBlockManager::block_table(int64_t request) const {
  static const std::vector<int64_t> none;
  auto it = m_seqs.find(request);
  return it == m_seqs.end() ? none : it->second.blocks;
}

int64_t KvBlockManager::block_refs(int64_t b) const {
  return m_blocks.at(static_cast<size_t>(b)).refs;
}

bool KvBlockManager::block_named(int64_t b) const {
  return m_blocks.at(static_cast<size_t>(b)).hash != 0;
}

}  // namespace perfsim
