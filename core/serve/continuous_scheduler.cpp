// Continuous batching at the level of engine steps (Yu et al. 2022, Orca; Kwon et al. 2023,
// vLLM). Two policies, as vLLM has had them:
// - Without chunked prefill (vLLM's V0 scheduler): prefills first. While waiting prompts fit
//   the step's token budget, the running-sequence limit and the KV pool (keeping the
//   watermark), a step prefills them alone; otherwise every running sequence decodes one token.
// - With chunked prefill (Agrawal et al. 2024, Sarathi-Serve; vLLM's V1 scheduler): one budget
//   of tokens per step, running requests first (decodes, then unfinished prompts), then new
//   requests in arrival order, the last prompt split to fill the budget ("stall-free").
// When a running sequence needs a KV block and the pool has none, the most recently admitted
// running request is preempted: its blocks are freed and it goes back to the front of the
// queue, to recompute its prompt and the tokens generated so far, or, with swap, its blocks are
// copied to host memory and back when it resumes.
#include <algorithm>

#include "core/serve/engine_state.hpp"

namespace perfsim::serve {

namespace {

class ContinuousScheduler final : public Scheduler {
 public:
  EngineStep next(EngineState& s, double now) override {
    EngineStep step;
    m_budget = s.config.step_tokens(s.max_seq);
    m_preempted = false;
    if (s.config.chunked_prefill > 0) {
      run_running(s, step);
      if (!m_preempted) admit_waiting(s, step, now, true);
      return step;
    }
    admit_waiting(s, step, now, false);
    if (!step.empty()) return step;
    run_running(s, step);
    return step;
  }

 private:
  // Every running request's next tokens (one for a decode, a budget-limited chunk for an
  // unfinished prompt), preempting from the back of the running list when blocks run out.
  void run_running(EngineState& s, EngineStep& step) {
    for (std::size_t i = 0; i < s.running.size() && m_budget > 0; ++i) {
      const int64_t id = s.running[i];
      Live& l = s.state(id);
      int64_t n = std::min(l.known(s.req(id)) - l.computed, m_budget);
      if (n <= 0) continue;
      // A decode speculates: k drafts after its last token, all verified in one pass (no more
      // than its output still needs beyond the bonus token, the model's positions or the budget).
      int64_t proposed = 0;
      if (s.config.speculative > 0 && n == 1 && l.computed >= s.req(id).prompt) {
        proposed = std::min({s.config.speculative, s.req(id).output - l.generated - 1,
                             s.max_seq - l.computed - 1, m_budget - 1});
        proposed = std::max<int64_t>(proposed, 0);
        n += proposed;
      }
      bool kept = true;
      while (!s.kv->grow(id, l.computed + n)) {
        const int64_t victim = s.running.back();
        preempt(s, step, victim);
        if (victim == id) {
          kept = false;
          break;
        }
      }
      if (!kept) break;
      add(step, id, n, l, s);
      step.seqs.back().proposed = proposed;
    }
  }

  // Waiting requests in arrival order while the budget, the running limit and the pool allow.
  // Without chunking a prompt must fit the remaining budget whole.
  void admit_waiting(EngineState& s, EngineStep& step, double now, bool chunked) {
    while (!s.waiting.empty() && m_budget > 0 &&
           static_cast<int64_t>(s.running.size()) < s.config.max_batch) {
      const int64_t id = s.waiting.front();
      Live& l = s.state(id);
      const PromptTokens p = s.prompt_of(id);
      // K/V that came with the request count as computed at its first admission (at least the
      // last prompt token is computed, for the logits of the next one).
      const int64_t ready = l.admitted ? 0 : std::min(s.req(id).kv_ready, l.known(s.req(id)) - 1);
      const int64_t base = l.swapped ? l.computed : std::max(s.kv->cached_prefix(p), ready);
      const int64_t left = l.known(s.req(id)) - base;
      if (!chunked && left > m_budget) break;
      const int64_t n = std::min(left, m_budget);
      const int64_t cached = s.kv->admit(p, base + n);
      if (cached < 0) break;
      if (l.swapped) {
        step.swap_in_blocks += blocks_for(l.computed, s.kv->block_size()) - cached / s.kv->block_size();
        l.swapped = false;
      } else {
        l.computed = std::max(cached, ready);
      }
      RequestRecord& rec = s.record(id);
      if (!l.admitted) {
        l.admitted = true;
        rec.admitted = now;
        rec.cached_tokens = cached;
      }
      s.waiting.pop_front();
      s.running.push_back(id);
      add(step, id, n, l, s);
    }
  }

  void add(EngineStep& step, int64_t id, int64_t n, const Live& l, const EngineState& s) {
    SeqWork w;
    w.request = id;
    w.tokens = n;
    w.position = l.computed;
    w.samples = l.computed + n >= l.known(s.req(id));
    step.seqs.push_back(w);
    m_budget -= n;
  }

  void preempt(EngineState& s, EngineStep& step, int64_t victim) {
    Live& l = s.state(victim);
    if (s.config.preemption == Preemption::swap) {
      step.swap_out_blocks += s.kv->blocks_of(victim);
      l.swapped = true;
    } else {
      l.computed = 0;
    }
    s.kv->release(victim);
    s.running.pop_back();
    // A victim already placed in this step leaves it.
    auto& seqs = step.seqs;
    for (auto it = seqs.begin(); it != seqs.end(); ++it)
      if (it->request == victim) {
        m_budget += it->tokens;
        seqs.erase(it);
        break;
      }
    s.waiting.push_front(victim);
    ++s.record(victim).preemptions;
    ++s.run.preemptions;
    m_preempted = true;
  }

  int64_t m_budget = 0;
  bool m_preempted = false;
};

}  // namespace

std::unique_ptr<Scheduler> make_continuous_scheduler() { return std::make_unique<ContinuousScheduler>(); }

}  // namespace perfsim::serve
