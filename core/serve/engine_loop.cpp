// One engine's loop, an event at a time (engine_loop.hpp): arrivals into the waiting queue (or
// refused), a step from the scheduler, the clock runs it, then every sequence's tokens and the
// finished requests.
#include "core/serve/engine_loop.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "core/serve/engine_state.hpp"

namespace perfsim::serve {

PromptTokens EngineState::prompt_of(int64_t id) const {
  const Request& r = req(id);
  PromptTokens p;
  p.request = id;
  p.tokens = r.prompt + state(id).generated;
  p.prefix_group = r.prefix_group;
  p.prefix_tokens = r.prefix_tokens;
  return p;
}

namespace {

constexpr double never = std::numeric_limits<double>::infinity();

// Of `proposed` draft tokens, how many a verify pass accepts: each with probability `alpha`
// until the first rejection (Leviathan et al. 2023), drawn from a hash of the request and the
// tokens it has, so a request accepts the same runs in every run of the same traffic.
int64_t accepted_drafts(const Request& r, int64_t generated, int64_t proposed, double alpha) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (const int64_t v : {r.id, r.prompt, r.output, generated}) {
    x ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
  }
  int64_t a = 0;
  while (a < proposed) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    if (static_cast<double>(x >> 11) * 0x1.0p-53 >= alpha) break;
    ++a;
  }
  return a;
}

// Why a request can never be served with this engine ("" when it can).
std::string refusal(const Request& r, const SchedulerConfig& c, const KvPool& pool, int64_t max_seq) {
  const int64_t total = r.prompt + r.output;
  if (total > max_seq)
    return fmt::format("prompt + output = {} tokens is beyond the model's max_seq = {}", total, max_seq);
  const int64_t block = c.paged ? pool.block : max_seq;
  const int64_t usable = pool.blocks - static_cast<int64_t>(c.watermark * static_cast<double>(pool.blocks));
  if (blocks_for(total, block) > usable)
    return fmt::format("needs {} KV blocks, more than the {} the pool can admit", blocks_for(total, block), usable);
  if (c.kind == SchedulerKind::continuous && c.chunked_prefill == 0 && r.prompt > c.step_tokens(max_seq))
    return fmt::format("prompt of {} tokens is beyond max_tokens = {} per step without chunked_prefill", r.prompt,
                       c.step_tokens(max_seq));
  return "";
}

}  // namespace

EngineLoop::EngineLoop(RequestTable& table, const SchedulerConfig& config, const KvPool& pool, int64_t max_seq,
                       StepClock& clock)
    : m_config(config), m_pool(pool), m_max_seq(max_seq), m_clock(clock), m_table(table) {
  if (pool.blocks <= 0 || pool.block <= 0) throw std::invalid_argument("run_engine: empty KV pool");
  m_run.pool = pool;
  const int64_t block = config.paged ? pool.block : max_seq;
  m_state = std::make_unique<EngineState>(EngineState{
      config, max_seq,
      std::make_unique<KvBlockManager>(pool.blocks, block, config.watermark, config.prefix_cache && config.paged),
      m_run, table, {}, {}, false});
  m_scheduler = config.kind == SchedulerKind::continuous ? make_continuous_scheduler() : make_batch_scheduler();
}

EngineLoop::~EngineLoop() = default;

double EngineLoop::now() const { return m_clock.now(); }

int64_t EngineLoop::outstanding() const {
  return static_cast<int64_t>(m_state->waiting.size() + m_state->running.size());
}

int64_t EngineLoop::cached_prefix(int64_t id) const { return m_state->kv->cached_prefix(m_state->prompt_of(id)); }

void EngineLoop::finish(int64_t id, double at, std::vector<Finished>& done) {
  m_state->record(id).finished = at;
  done.push_back({id, at});
}

void EngineLoop::arrive(int64_t id, double t, std::vector<Finished>& done) {
  // Idle or waiting for something to happen: time moves on to the arrival.
  if (m_clock.now() < t) m_clock.wait_until(t);
  m_state->record(id).request.arrival = t;
  const std::string why = refusal(m_state->req(id), m_config, m_pool, m_max_seq);
  if (!why.empty()) {
    m_state->record(id).rejected = why;
    finish(id, m_clock.now(), done);
    return;
  }
  m_state->waiting.push_back(id);
  m_blocked = false;
}

double EngineLoop::next_event() const {
  if (m_state->waiting.empty() && m_state->running.empty()) return never;
  return m_blocked ? m_wake : m_clock.now();
}

void EngineLoop::advance(bool arrivals_done, std::vector<Finished>& done) {
  EngineState& s = *m_state;
  if (m_blocked) {
    // Woken by the scheduler's deadline.
    m_clock.wait_until(m_wake);
    m_blocked = false;
  }
  const double now = m_clock.now();
  s.arrivals_done = arrivals_done;
  EngineStep step = m_scheduler->next(s, now);
  // A step emptied by preempting its last running request leaves room: ask once more.
  if (step.empty() && s.running.empty() && !s.waiting.empty()) step = m_scheduler->next(s, now);
  if (step.empty()) {
    const double wake = m_scheduler->wake_at(s);
    m_blocked = true;
    m_wake = wake > now ? wake : never;
    return;
  }

  if (m_clock.wants_block_tables()) {
    step.block_tables.clear();
    for (const SeqWork& w : step.seqs)
      step.block_tables.push_back(w.request >= 0 && s.kv->holds(w.request) ? s.kv->block_table(w.request)
                                                                           : std::vector<int64_t>{});
  }
  const double start = m_clock.now();
  m_clock.run(step);
  const double end = m_clock.now();
  StepRecord sr;
  sr.start = start;
  sr.duration = end - start;
  sr.seqs = static_cast<int32_t>(step.seqs.size());
  sr.tokens = static_cast<int32_t>(step.tokens());
  sr.prefill_tokens = static_cast<int32_t>(step.prefill_tokens());
  sr.waiting = static_cast<int32_t>(s.waiting.size());
  sr.kv_used_blocks = s.kv->used_blocks();
  sr.swap_blocks = step.swap_in_blocks + step.swap_out_blocks;
  for (const SeqWork& w : step.seqs) {
    if (w.decodes()) ++sr.decodes;
    if (w.padding || w.request < 0) continue;
    Live& l = s.state(w.request);
    RequestRecord& rec = s.record(w.request);
    // A verify pass keeps its last token and the drafts accepted before the first rejection;
    // the rejected rows stay in the sequence's blocks until the next pass overwrites them.
    const int64_t accepted = w.proposed > 0 ? accepted_drafts(rec.request, l.generated, w.proposed, s.config.acceptance) : 0;
    if (w.proposed > 0) {
      ++m_run.verifies;
      m_run.proposed += w.proposed;
      m_run.accepted += accepted;
    }
    l.computed += w.proposed > 0 ? 1 + accepted : w.tokens;
    s.kv->mark_computed(w.request, l.computed);
    if (!w.samples || l.generated >= rec.request.output) continue;
    // The tokens of one step arrive together: one gap between tokens, as a stream's chunk.
    const int64_t before = l.generated;
    l.generated = std::min(rec.request.output, before + 1 + accepted);
    rec.generated = l.generated;
    if (before == 0) rec.first_token = end;
    else m_run.itl.push_back(end - m_table.last_token[static_cast<std::size_t>(w.request)]);
    m_table.last_token[static_cast<std::size_t>(w.request)] = end;
    if (l.generated < rec.request.output) continue;
    finish(w.request, end, done);
    if (m_scheduler->releases_on_finish()) {
      s.kv->release(w.request);
      s.running.erase(std::find(s.running.begin(), s.running.end(), w.request));
    }
  }
  m_run.steps.push_back(sr);
  m_scheduler->after_step(s, step);
}

void EngineLoop::resolve_stall(std::vector<Finished>& done) {
  EngineState& s = *m_state;
  if (s.waiting.empty() || !s.running.empty())
    throw std::logic_error(fmt::format("serving engine stalled: {} waiting, {} running", s.waiting.size(),
                                       s.running.size()));
  const int64_t id = s.waiting.front();
  s.waiting.pop_front();
  s.record(id).rejected = "does not fit the KV pool beside the requests it would join";
  finish(id, m_clock.now(), done);
  m_blocked = false;
}

}  // namespace perfsim::serve
