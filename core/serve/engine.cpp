// The engine loop (engine.hpp): arrivals into the waiting queue (or refused), a step from the
// scheduler, the clock runs it, then every sequence's tokens and the finished requests.
#include "core/serve/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>
#include <stdexcept>

#include "core/deadline.hpp"
#include "core/serve/engine_state.hpp"

namespace perfsim {

namespace serve {

PromptTokens EngineState::prompt_of(int64_t id) const {
  const Request& r = req(id);
  PromptTokens p;
  p.request = id;
  p.tokens = r.prompt + live[static_cast<std::size_t>(id)].generated;
  p.prefix_group = r.prefix_group;
  p.prefix_tokens = r.prefix_tokens;
  return p;
}

}  // namespace serve

namespace {

using serve::EngineState;

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

struct Arrival {
  double time;
  int64_t id;
  bool operator>(const Arrival& o) const { return time != o.time ? time > o.time : id > o.id; }
};

}  // namespace

EngineRun run_engine(const std::vector<Request>& requests, const SchedulerConfig& config, const KvPool& pool,
                     int64_t max_seq, double think, StepClock& clock) {
  if (pool.blocks <= 0 || pool.block <= 0) throw std::invalid_argument("run_engine: empty KV pool");
  EngineRun run;
  run.pool = pool;
  run.requests.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].id != static_cast<int64_t>(i)) throw std::invalid_argument("run_engine: request ids must be 0..n-1");
    run.requests[i].request = requests[i];
  }
  const int64_t block = config.paged ? pool.block : max_seq;
  EngineState s{config, max_seq,
                std::make_unique<KvBlockManager>(pool.blocks, block, config.watermark, config.prefix_cache && config.paged),
                run, std::vector<serve::Live>(requests.size()), {}, {}, false};
  std::unique_ptr<serve::Scheduler> scheduler = config.kind == SchedulerKind::continuous
                                                    ? serve::make_continuous_scheduler()
                                                    : serve::make_batch_scheduler();

  // Open loop: every arrival is known. Closed loop: each client's first request at 0, the next
  // one `think` after its previous one finished.
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals;
  std::vector<std::deque<int64_t>> next_of_user;
  for (const Request& r : requests) {
    if (r.user < 0) {
      arrivals.push({r.arrival, r.id});
      continue;
    }
    if (static_cast<std::size_t>(r.user) >= next_of_user.size()) next_of_user.resize(static_cast<std::size_t>(r.user) + 1);
    next_of_user[static_cast<std::size_t>(r.user)].push_back(r.id);
  }
  auto send_next = [&](int user, double at) {
    if (user < 0) return;
    auto& q = next_of_user[static_cast<std::size_t>(user)];
    if (q.empty()) return;
    const int64_t id = q.front();
    q.pop_front();
    run.requests[static_cast<std::size_t>(id)].request.arrival = at;
    arrivals.push({at, id});
  };
  for (std::size_t u = 0; u < next_of_user.size(); ++u) send_next(static_cast<int>(u), clock.now());
  run.start = arrivals.empty() ? clock.now() : arrivals.top().time;

  std::vector<double> last_token(requests.size(), 0.0);
  auto finish = [&](int64_t id, double at) {
    RequestRecord& rec = s.record(id);
    rec.finished = at;
    send_next(rec.request.user, at + think);
  };

  int64_t served_or_refused = 0;
  const auto total = static_cast<int64_t>(requests.size());
  while (served_or_refused < total) {
    check_deadline();
    const double now = clock.now();
    while (!arrivals.empty() && arrivals.top().time <= now) {
      const int64_t id = arrivals.top().id;
      arrivals.pop();
      const std::string why = refusal(s.req(id), config, pool, max_seq);
      if (why.empty()) {
        s.waiting.push_back(id);
        continue;
      }
      s.record(id).rejected = why;
      ++served_or_refused;
      finish(id, now);
    }
    if (served_or_refused == total) break;  // the last arrivals were refused
    s.arrivals_done = arrivals.empty() && std::all_of(next_of_user.begin(), next_of_user.end(),
                                                      [](const auto& q) { return q.empty(); });
    EngineStep step = scheduler->next(s, now);
    // A step emptied by preempting its last running request leaves room: ask once more.
    if (step.empty() && s.running.empty() && !s.waiting.empty()) step = scheduler->next(s, now);
    if (step.empty()) {
      const double t = std::min(arrivals.empty() ? std::numeric_limits<double>::infinity() : arrivals.top().time,
                                scheduler->wake_at(s));
      if (t > now && t < std::numeric_limits<double>::infinity()) {
        clock.wait_until(t);
        continue;
      }
      // Nothing runs and no later event can change that: the request at the front can never be
      // placed.
      if (s.waiting.empty() || !s.running.empty())
        throw std::logic_error(fmt::format("serving engine stalled: {} waiting, {} running, {} of {} requests done",
                                             s.waiting.size(), s.running.size(), served_or_refused, total));
      const int64_t id = s.waiting.front();
      s.waiting.pop_front();
      s.record(id).rejected = "does not fit the KV pool beside the requests it would join";
      ++served_or_refused;
      finish(id, now);
      continue;
    }

    if (clock.wants_block_tables()) {
      step.block_tables.clear();
      for (const SeqWork& w : step.seqs)
        step.block_tables.push_back(w.request >= 0 && s.kv->holds(w.request) ? s.kv->block_table(w.request)
                                                                             : std::vector<int64_t>{});
    }
    const double start = clock.now();
    clock.run(step);
    const double end = clock.now();
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
      serve::Live& l = s.state(w.request);
      RequestRecord& rec = s.record(w.request);
      l.computed += w.tokens;
      s.kv->mark_computed(w.request, l.computed);
      if (!w.samples || l.generated >= rec.request.output) continue;
      ++l.generated;
      rec.generated = l.generated;
      if (l.generated == 1) rec.first_token = end;
      else run.itl.push_back(end - last_token[static_cast<std::size_t>(w.request)]);
      last_token[static_cast<std::size_t>(w.request)] = end;
      if (l.generated < rec.request.output) continue;
      ++served_or_refused;
      finish(w.request, end);
      if (scheduler->releases_on_finish()) {
        s.kv->release(w.request);
        s.running.erase(std::find(s.running.begin(), s.running.end(), w.request));
      }
    }
    run.steps.push_back(sr);
    scheduler->after_step(s, step);
  }
  run.end = run.start;
  for (const RequestRecord& r : run.requests)
    if (r.rejected.empty()) run.end = std::max(run.end, r.finished);
  return run;
}

}  // namespace perfsim
