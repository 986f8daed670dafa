// The driver of one or more engines (router.hpp): arrivals in time order, each routed, and
// always the engine whose next event comes first advanced by one event.
#include "core/serve/router.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <stdexcept>

#include "core/deadline.hpp"
#include "core/serve/engine_loop.hpp"
#include "core/serve/engine_state.hpp"

namespace perfsim {

namespace {

constexpr double never = std::numeric_limits<double>::infinity();

struct Arrival {
  double time;
  int64_t id;
  bool operator>(const Arrival& o) const { return time != o.time ? time > o.time : id > o.id; }
};

using serve::EngineLoop;
using serve::Finished;

// The replicas: `group` consecutive engines each.
struct Replicas {
  const std::vector<std::unique_ptr<EngineLoop>>& engines;
  std::size_t group;

  [[nodiscard]] std::size_t count() const { return engines.size() / group; }
  [[nodiscard]] int64_t outstanding(std::size_t r) const {
    int64_t n = 0;
    for (std::size_t e = r * group; e < (r + 1) * group; ++e) n += engines[e]->outstanding();
    return n;
  }
  [[nodiscard]] std::size_t least_outstanding() const {
    std::size_t best = 0;
    for (std::size_t r = 1; r < count(); ++r)
      if (outstanding(r) < outstanding(best)) best = r;
    return best;
  }
  // Replica r's engine with the longest cached prefix of `id` (0 when none holds one), else the
  // one with the fewest outstanding requests.
  [[nodiscard]] std::size_t engine_for(std::size_t r, int64_t id, int64_t* prefix = nullptr) const {
    std::size_t best = r * group;
    int64_t most = 0;
    for (std::size_t e = r * group; e < (r + 1) * group; ++e) {
      if (engines[e]->outstanding() < engines[best]->outstanding() && most == 0) best = e;
      if (const int64_t c = engines[e]->cached_prefix(id); c > most) most = c, best = e;
    }
    if (prefix != nullptr) *prefix = most;
    return best;
  }
};

}  // namespace

const char* name_of(RouterPolicy p) {
  switch (p) {
    case RouterPolicy::round_robin: return "round_robin";
    case RouterPolicy::least_outstanding: return "least_outstanding";
    case RouterPolicy::prefix: return "prefix";
  }
  return "?";
}

bool router_policy_of(std::string_view name, RouterPolicy& out) {
  for (RouterPolicy p : {RouterPolicy::round_robin, RouterPolicy::least_outstanding, RouterPolicy::prefix})
    if (name == name_of(p)) {
      out = p;
      return true;
    }
  return false;
}

ReplicasRun run_replicas(const std::vector<Request>& requests, const SchedulerConfig& config, const KvPool& pool,
                         int64_t max_seq, double think, const std::vector<StepClock*>& clocks, RouterPolicy policy,
                         int group) {
  if (clocks.empty()) throw std::invalid_argument("run_replicas: no engine");
  if (group < 1 || clocks.size() % static_cast<std::size_t>(group) != 0)
    throw std::invalid_argument("run_replicas: the engines are not whole groups");
  serve::RequestTable table;
  table.records.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].id != static_cast<int64_t>(i)) throw std::invalid_argument("run_engine: request ids must be 0..n-1");
    table.records[i].request = requests[i];
  }
  table.live.resize(requests.size());
  table.last_token.assign(requests.size(), 0.0);
  std::vector<std::unique_ptr<EngineLoop>> engines;
  for (StepClock* c : clocks) engines.push_back(std::make_unique<EngineLoop>(table, config, pool, max_seq, *c));
  ReplicasRun out;
  out.replica_of.assign(requests.size(), -1);

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
    arrivals.push({at, id});
  };
  const double t0 = engines.front()->now();
  for (std::size_t u = 0; u < next_of_user.size(); ++u) send_next(static_cast<int>(u), t0);
  const double start = arrivals.empty() ? t0 : arrivals.top().time;

  int64_t left = static_cast<int64_t>(requests.size());
  std::vector<Finished> done;
  auto settle = [&] {
    for (const Finished& f : done) {
      --left;
      send_next(requests[static_cast<std::size_t>(f.id)].user, f.at + think);
    }
    done.clear();
  };
  int64_t routed = 0;
  const Replicas replicas{engines, static_cast<std::size_t>(group)};
  // The replica a request goes to.
  auto route = [&](int64_t id) -> std::size_t {
    const std::size_t n = replicas.count();
    if (n == 1) return 0;
    switch (policy) {
      case RouterPolicy::round_robin: return static_cast<std::size_t>(routed % static_cast<int64_t>(n));
      case RouterPolicy::least_outstanding: return replicas.least_outstanding();
      case RouterPolicy::prefix: {
        std::size_t best = replicas.least_outstanding();
        int64_t most = 0;
        for (std::size_t r = 0; r < n; ++r) {
          int64_t c = 0;
          (void)replicas.engine_for(r, id, &c);
          if (c > most) most = c, best = r;
        }
        return best;
      }
    }
    return 0;
  };

  // The engines by their next event, earliest first (ties: lowest index). An engine's entry is
  // renewed whenever it acts or receives a request; older entries of it are stale and skipped,
  // so finding the next engine costs log N rather than a scan of all. (An executing engine's
  // next event is its wall clock's now, which moves on by itself: entries are told apart by
  // their renewal, not by their time.)
  struct Entry {
    double at;
    std::size_t engine;
    uint64_t renewal;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : engine > o.engine; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> upcoming;
  std::vector<uint64_t> renewals(engines.size(), 0);
  auto renew = [&](std::size_t i) {
    ++renewals[i];
    if (const double t = engines[i]->next_event(); t < never) upcoming.push({t, i, renewals[i]});
  };
  for (std::size_t i = 0; i < engines.size(); ++i) renew(i);
  auto next_engine = [&]() -> std::size_t {
    while (!upcoming.empty() && upcoming.top().renewal != renewals[upcoming.top().engine]) upcoming.pop();
    return upcoming.empty() ? engines.size() : upcoming.top().engine;
  };

  while (left > 0) {
    check_deadline();
    const std::size_t first = next_engine();
    const double engine_at = first < engines.size() ? engines[first]->next_event() : never;
    const bool arrivals_done =
        arrivals.empty() && std::all_of(next_of_user.begin(), next_of_user.end(), [](const auto& q) { return q.empty(); });
    if (!arrivals.empty() && arrivals.top().time <= engine_at) {
      const Arrival a = arrivals.top();
      arrivals.pop();
      const std::size_t r = route(a.id);
      const std::size_t e = replicas.engine_for(r, a.id);
      ++routed;
      out.replica_of[static_cast<std::size_t>(a.id)] = static_cast<int>(r);
      engines[e]->arrive(a.id, a.time, done);
      renew(e);
    } else if (engine_at < never) {
      upcoming.pop();
      engines[first]->advance(arrivals_done, done);
      renew(first);
    } else {
      // No arrival and no engine can act: a request waits that can never be placed.
      bool resolved = false;
      for (std::size_t i = 0; i < engines.size() && !resolved; ++i)
        if (engines[i]->outstanding() > 0) {
          engines[i]->resolve_stall(done);
          renew(i);
          resolved = true;
        }
      if (!resolved) throw std::logic_error("serving engines stalled with requests left");
    }
    settle();
  }

  // Every request by id, and (behind a router) each replica's own requests and steps.
  out.merged.pool = pool;
  out.merged.start = start;
  out.merged.end = start;
  for (const RequestRecord& r : table.records)
    if (r.rejected.empty()) out.merged.end = std::max(out.merged.end, r.finished);
  const std::size_t n_replicas = replicas.count();
  if (n_replicas > 1) {
    out.replicas.resize(n_replicas);
    for (EngineRun& own : out.replicas) {
      own.pool = pool;
      own.start = own.end = start;
    }
    for (std::size_t id = 0; id < requests.size(); ++id) {
      EngineRun& own = out.replicas[static_cast<std::size_t>(out.replica_of[id])];
      own.requests.push_back(table.records[id]);
      if (table.records[id].rejected.empty()) own.end = std::max(own.end, table.records[id].finished);
    }
  }
  // An engine's steps, gaps and counts added to a run that holds several.
  auto add = [](EngineRun& into, const EngineRun& run) {
    into.steps.insert(into.steps.end(), run.steps.begin(), run.steps.end());
    into.itl.insert(into.itl.end(), run.itl.begin(), run.itl.end());
    into.preemptions += run.preemptions;
    into.batches += run.batches;
    if (run.kv_capped_batches > 0)
      into.kv_capped_smallest = into.kv_capped_batches == 0 ? run.kv_capped_smallest
                                                            : std::min(into.kv_capped_smallest, run.kv_capped_smallest);
    into.kv_capped_batches += run.kv_capped_batches;
    into.verifies += run.verifies;
    into.proposed += run.proposed;
    into.accepted += run.accepted;
  };
  for (std::size_t r = 0; r < engines.size(); ++r) {
    const EngineRun& run = engines[r]->run();
    add(out.merged, run);
    if (n_replicas > 1) add(out.replicas[r / static_cast<std::size_t>(group)], run);
  }
  // A replica of several engines (pipeline batches in flight): its steps in time order.
  auto by_start = [](const StepRecord& a, const StepRecord& b) { return a.start < b.start; };
  if (group > 1) {
    std::stable_sort(out.merged.steps.begin(), out.merged.steps.end(), by_start);
    for (EngineRun& own : out.replicas) std::stable_sort(own.steps.begin(), own.steps.end(), by_start);
  }
  out.merged.requests = std::move(table.records);
  return out;
}

}  // namespace perfsim
