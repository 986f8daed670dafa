// The engine's state between steps, shared by the schedulers (batch_scheduler.cpp,
// continuous_scheduler.cpp) and the loop (engine.cpp).
#pragma once
#include <deque>
#include <limits>
#include <memory>
#include <vector>

#include "core/serve/engine.hpp"
#include "core/serve/kv_blocks.hpp"

namespace perfsim::serve {

// A request the engine holds: how far its tokens are computed and generated.
struct Live {
  int64_t computed = 0;   // tokens whose K/V are in the cache
  int64_t generated = 0;  // output tokens sampled so far
  bool swapped = false;   // preempted by swap: its computed K/V wait in host memory
  bool admitted = false;
  [[nodiscard]] int64_t known(const Request& r) const { return r.prompt + generated; }
};

// What the engines of a run share, by request id: each engine touches only the requests it was
// given, so several engines behind a router need one copy of these, not one each.
struct RequestTable {
  std::vector<RequestRecord> records;
  std::vector<Live> live;
  std::vector<double> last_token;  // when each request's latest token came (for the gaps between tokens)
};

struct EngineState {
  const SchedulerConfig& config;
  int64_t max_seq = 0;
  std::unique_ptr<KvBlockManager> kv;
  EngineRun& run;                  // this engine's steps, gaps and preemptions
  RequestTable& table;
  std::deque<int64_t> waiting;     // arrived, not running (preempted ones at the front)
  std::vector<int64_t> running;    // in admission order
  bool arrivals_done = false;      // no request is still to arrive

  [[nodiscard]] const Request& req(int64_t id) const { return table.records[static_cast<std::size_t>(id)].request; }
  [[nodiscard]] Live& state(int64_t id) { return table.live[static_cast<std::size_t>(id)]; }
  [[nodiscard]] const Live& state(int64_t id) const { return table.live[static_cast<std::size_t>(id)]; }
  [[nodiscard]] RequestRecord& record(int64_t id) { return table.records[static_cast<std::size_t>(id)]; }
  // The prompt as the cache sees it (prompt plus tokens generated before a preemption).
  [[nodiscard]] PromptTokens prompt_of(int64_t id) const;
};

// A scheduler forms the next step from the state (empty: nothing to run until wake_at()).
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual EngineStep next(EngineState& s, double now) = 0;
  // After a step: sampling, retiring finished requests (done by the engine first).
  virtual void after_step(EngineState& s, const EngineStep& step) {}
  // When to look again without an arrival (dynamic batching's deadline); +inf: never.
  [[nodiscard]] virtual double wake_at(const EngineState& s) const { return std::numeric_limits<double>::infinity(); }
  // Whether a finished request's KV blocks go back at once (continuous) or with its batch.
  [[nodiscard]] virtual bool releases_on_finish() const { return true; }
};

[[nodiscard]] std::unique_ptr<Scheduler> make_batch_scheduler();       // static and dynamic
[[nodiscard]] std::unique_ptr<Scheduler> make_continuous_scheduler();

}  // namespace perfsim::serve
