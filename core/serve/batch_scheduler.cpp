// Static and dynamic batching: a batch is formed from the waiting queue, prefilled together
// (prompts padded to the longest) and decoded together until its longest output is done;
// sequences that finish early stay in the batch as padding, and no request joins a running
// batch. Static batching waits for max_batch requests (or the last ones); dynamic batching, as
// Triton's dynamic batcher, dispatches as soon as max_batch or preferred_batch requests wait or
// the oldest has waited max_wait.
#include <algorithm>

#include "core/serve/engine_state.hpp"

namespace perfsim::serve {

namespace {

class BatchScheduler final : public Scheduler {
 public:
  EngineStep next(EngineState& s, double now) override {
    if (m_batch.empty() && !form_batch(s, now)) return {};
    EngineStep step;
    for (int64_t id : m_batch) {
      SeqWork w;
      w.request = id;
      if (m_decodes == 0) {  // the batch's prefill
        w.tokens = m_prompt;
        w.position = 0;
      } else {
        w.tokens = 1;
        w.position = m_prompt + m_decodes - 1;
        w.padding = s.state(id).generated >= s.req(id).output;
      }
      step.seqs.push_back(w);
    }
    ++m_decodes;
    return step;
  }

  void after_step(EngineState& s, const EngineStep&) override {
    const bool done = std::all_of(m_batch.begin(), m_batch.end(),
                                  [&](int64_t id) { return s.state(id).generated >= s.req(id).output; });
    if (!done) return;
    for (int64_t id : m_batch) s.kv->release(id);
    m_batch.clear();
    s.running.clear();
  }

  [[nodiscard]] double wake_at(const EngineState& s) const override {
    if (s.config.kind != SchedulerKind::dynamic || !m_batch.empty() || s.waiting.empty())
      return Scheduler::wake_at(s);
    return s.req(s.waiting.front()).arrival + s.config.max_wait;
  }

  [[nodiscard]] bool releases_on_finish() const override { return false; }

 private:
  bool ready(const EngineState& s, double now) const {
    const auto waiting = static_cast<int64_t>(s.waiting.size());
    if (waiting == 0) return false;
    if (waiting >= s.config.max_batch || s.arrivals_done) return true;
    if (s.config.kind != SchedulerKind::dynamic) return false;
    if (s.config.preferred_batch > 0 && waiting >= s.config.preferred_batch) return true;
    return now >= s.req(s.waiting.front()).arrival + s.config.max_wait;
  }

  // Takes the longest run of waiting requests (up to max_batch) whose KV fits the pool: each
  // holds the batch's padded length (longest prompt + longest output) in blocks, or max_seq
  // without paging. The first always fits (the engine refuses requests larger than the pool);
  // false when the scheduler is not ready.
  bool form_batch(EngineState& s, double now) {
    if (!ready(s, now)) return false;
    const auto most = std::min<std::size_t>(s.waiting.size(), static_cast<std::size_t>(s.config.max_batch));
    const int64_t free_blocks = s.kv->available_blocks() -
                                static_cast<int64_t>(s.config.watermark * static_cast<double>(s.kv->total_blocks()));
    std::size_t n = 0;
    int64_t prompt = 0, output = 0, hold = 0;
    for (std::size_t k = 0; k < most; ++k) {
      const int64_t p = std::max(prompt, s.req(s.waiting[k]).prompt);
      const int64_t o = std::max(output, s.req(s.waiting[k]).output);
      const int64_t h = s.config.paged ? p + o : s.max_seq;
      if (k > 0 && static_cast<int64_t>(k + 1) * blocks_for(h, s.kv->block_size()) > free_blocks) break;
      prompt = p, output = o, hold = h, n = k + 1;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const int64_t id = s.waiting.front();
      if (s.kv->admit(s.prompt_of(id), hold) < 0) break;
      s.waiting.pop_front();
      m_batch.push_back(id);
      s.record(id).admitted = now;
    }
    if (m_batch.empty()) return false;
    ++s.run.batches;
    if (m_batch.size() < most) {
      const auto size = static_cast<int64_t>(m_batch.size());
      s.run.kv_capped_smallest = s.run.kv_capped_batches == 0 ? size : std::min(s.run.kv_capped_smallest, size);
      ++s.run.kv_capped_batches;
    }
    // The batch pads to its own longest prompt (those that did not fit wait for the next one).
    m_prompt = 0;
    for (int64_t id : m_batch) m_prompt = std::max(m_prompt, s.req(id).prompt);
    m_decodes = 0;
    s.running = m_batch;
    return true;
  }

  std::vector<int64_t> m_batch;
  int64_t m_prompt = 0;
  int64_t m_decodes = 0;  // steps run after the prefill
};

}  // namespace

std::unique_ptr<Scheduler> make_batch_scheduler() { return std::make_unique<BatchScheduler>(); }

}  // namespace perfsim::serve
