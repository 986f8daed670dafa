// The serving engine's loop: requests arrive, a scheduler forms engine steps, a clock runs
// them. The same loop drives the prediction (a virtual clock whose steps take the cost model's
// time) and an execution (the wall clock, whose steps run on a backend), so the two differ only
// in their clocks.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/serve/engine_step.hpp"
#include "core/serve/scheduler_config.hpp"
#include "core/serve/traffic.hpp"

namespace perfsim {

// The KV cache's pool: `blocks` blocks of `block` tokens, `block_bytes` each over all layers.
struct KvPool {
  int64_t blocks = 0;
  int64_t block = 16;
  double block_bytes = 0;
};

// Time as the engine sees it: now, waiting for the next arrival, and running a step (now
// advances by the step's time).
class StepClock {
 public:
  virtual ~StepClock() = default;
  [[nodiscard]] virtual double now() const = 0;
  virtual void wait_until(double t) = 0;
  virtual void run(const EngineStep& step) = 0;
  // Whether run() reads each sequence's KV blocks (EngineStep::block_tables): an executing
  // clock places the step's K/V rows in them.
  [[nodiscard]] virtual bool wants_block_tables() const { return false; }
};

struct RequestRecord {
  Request request;
  std::string rejected;       // why it was refused ("" = served)
  double admitted = -1;       // first scheduled (seconds from the run's start)
  double first_token = -1;
  double finished = -1;       // its last token
  int64_t generated = 0;
  int64_t preemptions = 0;
  int64_t cached_tokens = 0;  // prompt tokens found in the prefix cache at first admission
};

struct StepRecord {
  double start = 0, duration = 0;
  int32_t seqs = 0;           // sequences in the step (padding included)
  int32_t tokens = 0;         // tokens computed
  int32_t prefill_tokens = 0;
  int32_t decodes = 0;        // sequences computing one token
  int32_t waiting = 0;        // requests arrived and not running after the step was formed
  int64_t kv_used_blocks = 0;
  int64_t swap_blocks = 0;    // blocks moved to or from host memory
};

// An executed engine step's seconds (an executing clock's record), and the cost model's price
// of the same batch.
struct ExecutedStep {
  double wall = 0;       // the whole step as the engine saw it: graph built, inputs written, run
  double device = 0;     // of it, the device's time (GPU events; on a CPU the run itself)
  double host = 0;       // of it, the engine's host work (building the step, writing its inputs)
  double predicted = 0;  // StepPricer::price of the same batch
  double predicted_host = 0;  // of it, the host's part (StepPricer::host)
};

struct EngineRun {
  std::vector<RequestRecord> requests;  // by request id
  std::vector<StepRecord> steps;
  std::vector<double> itl;              // every gap between consecutive tokens, pooled (seconds)
  int64_t preemptions = 0;
  // Static and dynamic batching: batches formed, and of them those held below max_batch while
  // more requests waited because their KV did not fit the pool (the smallest such batch).
  int64_t batches = 0, kv_capped_batches = 0, kv_capped_smallest = 0;
  // Speculative decoding: verify passes, draft tokens they checked, and of those accepted.
  int64_t verifies = 0, proposed = 0, accepted = 0;
  KvPool pool;
  double start = 0, end = 0;            // first arrival .. last token
};

// Runs `requests` to the end. Requests longer than max_seq or than the whole pool are refused
// (recorded, the run goes on). Closed-loop requests (Request::user >= 0) arrive `think` seconds
// after their client's previous request finished; the first of each client at 0.
[[nodiscard]] EngineRun run_engine(const std::vector<Request>& requests, const SchedulerConfig& config,
                                   const KvPool& pool, int64_t max_seq, double think, StepClock& clock);

}  // namespace perfsim
