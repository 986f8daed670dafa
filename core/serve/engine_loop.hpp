// One engine advanced an event at a time by a driver: run_engine (engine.cpp) for a single
// engine, run_replicas (router.hpp) for several behind a router. Each engine keeps its own
// clock, KV blocks and scheduler; the driver delivers arrivals in time order and always
// advances the engine whose next event comes first, so engines interleave as they would in
// time and a router sees each one's state as of the moment a request arrives.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/serve/engine.hpp"

namespace perfsim::serve {

struct EngineState;
struct RequestTable;
class Scheduler;

// A request that left an engine: served to its last token, or refused.
struct Finished {
  int64_t id = 0;
  double at = 0;
};

class EngineLoop {
 public:
  // `table` holds every request of the run by id (shared by the engines of a run); the engine
  // serves those it is given.
  EngineLoop(RequestTable& table, const SchedulerConfig& config, const KvPool& pool, int64_t max_seq,
             StepClock& clock);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Request `id` arrives at `t` (not before any event already delivered): queued, or refused
  // and finished at once.
  void arrive(int64_t id, double t, std::vector<Finished>& done);
  // When the engine acts next: its clock's now while it holds work it may schedule, the
  // scheduler's wake time while it waits for one (dynamic batching), +inf when idle or when
  // only an arrival can change what it can run.
  [[nodiscard]] double next_event() const;
  // Acts at next_event(): forms and runs a step, or finds it cannot and waits (up to the wake
  // time, or for an arrival). `arrivals_done`: no request is still to come to this engine.
  void advance(bool arrivals_done, std::vector<Finished>& done);
  // No arrival is left to change it: refuses the waiting request at the front, which can never
  // be placed. Throws std::logic_error when requests run and still nothing can (a stall).
  void resolve_stall(std::vector<Finished>& done);

  [[nodiscard]] int64_t outstanding() const;  // requests waiting or running
  // Leading prompt tokens of request `id` this engine's prefix cache holds now (0 without one).
  [[nodiscard]] int64_t cached_prefix(int64_t id) const;
  [[nodiscard]] double now() const;
  // This engine's steps, gaps between tokens and preemptions (its requests are in the table).
  [[nodiscard]] EngineRun& run() { return m_run; }

 private:
  void finish(int64_t id, double at, std::vector<Finished>& done);

  EngineRun m_run;
  const SchedulerConfig& m_config;
  KvPool m_pool;
  int64_t m_max_seq = 0;
  StepClock& m_clock;
  RequestTable& m_table;
  std::unique_ptr<EngineState> m_state;
  std::unique_ptr<Scheduler> m_scheduler;
  bool m_blocked = false;  // the last attempt formed no step; only an arrival or m_wake changes that
  double m_wake = 0;       // when blocked: the scheduler's wake time (+inf: none)
};

}  // namespace perfsim::serve
