// Pipeline schedules and their event simulation (see pipeline_schedule.hpp).
#include "core/parallel/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/errors.hpp"

namespace perfsim {

namespace {

void check_sizes(PipelineSchedule s, int p, int m, int v) {
  if (p < 1 || m < 1 || v < 1)
    throw ConfigError(fmt::format(
        "a pipeline needs at least 1 stage, 1 micro-batch and 1 chunk per stage (got p={}, m={}, v={})",
        p, m, v));
  if (s != PipelineSchedule::interleaved && v != 1)
    throw ConfigError(fmt::format(
        "the {} schedule runs 1 model chunk per stage (got v={}); use the interleaved schedule for more",
        name_of(s), v));
  if (s == PipelineSchedule::interleaved && m % p != 0)
    throw ConfigError(fmt::format(
        "the interleaved schedule needs the micro-batches to be a multiple of the stages (got m={}, p={})",
        m, p));
}

void check_times(const PipelineTimes& t, int p, int v) {
  auto check_table = [&](const std::vector<std::vector<double>>& table, const char* name) {
    if (static_cast<int>(table.size()) != p)
      throw ConfigError(fmt::format("pipeline times: {} has {} stages, the pipeline {}", name,
                                    table.size(), p));
    for (int s = 0; s < p; ++s) {
      if (static_cast<int>(table[s].size()) != v)
        throw ConfigError(fmt::format("pipeline times: {}[{}] has {} chunks, the pipeline {} per stage",
                                      name, s, table[s].size(), v));
      for (int c = 0; c < v; ++c)
        if (!(table[s][c] >= 0) || !std::isfinite(table[s][c]))
          throw ConfigError(fmt::format("pipeline times: {}[{}][{}] must be a finite time >= 0 (got {})",
                                        name, s, c, table[s][c]));
    }
  };
  check_table(t.forward, "forward");
  check_table(t.backward, "backward");
  for (auto [value, name] : {std::pair{t.send_forward, "send_forward"}, std::pair{t.send_backward, "send_backward"}})
    if (!(value >= 0) || !std::isfinite(value))
      throw ConfigError(fmt::format("pipeline times: {} must be a finite time >= 0 (got {})", name, value));
}

// PipeDream-Flush / Megatron's non-interleaved 1F1B (Narayanan et al. 2021, §2.2.1): the warm-up
// forwards fill the p − s − 1 stages after this one, after which each backward frees the
// activations of one micro-batch before the next forward stores another, so a stage holds at
// most p − s.
void one_f_one_b(std::vector<PipelineSlot>& out, int p, int m, int stage) {
  const int warmup = std::min(p - stage - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({PassKind::forward, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({PassKind::forward, warmup + i, 0});
    out.push_back({PassKind::backward, i, 0});
  }
  for (int i = m - warmup; i < m; ++i) out.push_back({PassKind::backward, i, 0});
}

// Megatron-LM's interleaved 1F1B (Narayanan et al. 2021, §2.2.2; megatron/core/pipeline_parallel/
// schedules.py, forward_backward_pipelining_with_interleaving). Pass k of a stage's m·v forwards
// (or backwards) belongs to the group of p micro-batches k / (p·v) and, within it, to chunk
// (k mod p·v) / p (reversed for backwards, which walk the model from its end); the micro-batch is
// the group's first plus k mod p. The warm-up covers the first v − 1 chunks of the first group,
// (v − 1)·p forwards, plus two per stage after this one: the first backward reaches stage s once
// micro-batch 0's last-chunk forward has crossed the p − s − 1 stages after it and its gradient
// has crossed them back, and s keeps running forwards meanwhile.
void interleaved(std::vector<PipelineSlot>& out, int p, int m, int v, int stage) {
  const int total = m * v;
  // With m == p Megatron runs every forward first (all_warmup_microbatches).
  const int warmup = m == p ? total : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  // Walks passes k = 0, 1, … as (group, chunk, index in group) = (k / (p·v), (k mod p·v) / p,
  // k mod p), counting instead of dividing (the generator runs for every simulated step).
  struct Walk {
    PassKind kind;
    int p, v;
    int group = 0, chunk = 0, index = 0;
    PipelineSlot next() {
      const PipelineSlot s{kind, group * p + index, kind == PassKind::forward ? chunk : v - 1 - chunk};
      if (++index == p) {
        index = 0;
        if (++chunk == v) {
          chunk = 0;
          ++group;
        }
      }
      return s;
    }
  };
  Walk fwd{PassKind::forward, p, v}, bwd{PassKind::backward, p, v};
  for (int k = 0; k < warmup; ++k) out.push_back(fwd.next());
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(fwd.next());
    out.push_back(bwd.next());
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(bwd.next());
}

// Appends stage `stage`'s order to `out`.
void append_order(std::vector<PipelineSlot>& out, PipelineSchedule s, int p, int m, int v, int stage) {
  switch (s) {
    case PipelineSchedule::gpipe:
      // Huang et al. 2019 (GPipe): the whole batch forward, then backward in the same order
      // (Narayanan et al. 2021, Figure 3).
      for (int i = 0; i < m; ++i) out.push_back({PassKind::forward, i, 0});
      for (int i = 0; i < m; ++i) out.push_back({PassKind::backward, i, 0});
      return;
    case PipelineSchedule::one_f_one_b: one_f_one_b(out, p, m, stage); return;
    case PipelineSchedule::interleaved:
      if (v == 1) one_f_one_b(out, p, m, stage);
      else interleaved(out, p, m, v, stage);
      return;
  }
}

const char* kind_name(PassKind k) { return k == PassKind::forward ? "forward" : "backward"; }

// Each (micro-batch, chunk) forward then backward exactly once: what the simulation's
// bookkeeping relies on.
void check_order(const std::vector<PipelineSlot>& order, int stage, int m, int v) {
  if (order.size() != static_cast<size_t>(2) * m * v)
    throw std::logic_error(fmt::format("pipeline order of stage {} has {} passes, not 2·m·v = {}", stage,
                                       order.size(), 2 * m * v));
  std::vector<char> state(static_cast<size_t>(m) * v, 0);  // 0 none, 1 forward ran, 2 both
  for (const PipelineSlot& s : order) {
    if (s.micro_batch < 0 || s.micro_batch >= m || s.chunk < 0 || s.chunk >= v)
      throw std::logic_error(fmt::format("pipeline order of stage {}: micro-batch {} chunk {} is out of range",
                                         stage, s.micro_batch, s.chunk));
    char& st = state[static_cast<size_t>(s.micro_batch) * v + s.chunk];
    const char want = s.kind == PassKind::forward ? 0 : 1;
    if (st != want)
      throw std::logic_error(fmt::format("pipeline order of stage {}: {} of micro-batch {} chunk {} {}", stage,
                                         kind_name(s.kind), s.micro_batch, s.chunk,
                                         st > want ? "runs twice" : "runs before its forward"));
    ++st;
  }
}

// Every stage's order back to back, stage s's 2·m·v passes from s·2·m·v: the walk below stays
// in one array.
struct Orders {
  int p = 0, m = 0, v = 0;
  const PipelineSlot* slots = nullptr;
  [[nodiscard]] size_t per_stage() const { return static_cast<size_t>(2) * m * v; }
  [[nodiscard]] const PipelineSlot& at(int stage, size_t i) const { return slots[stage * per_stage() + i]; }
};

// Buffers reused by every simulation on a thread. A layout search simulates thousands of
// pipelines; at p = 64, m = 512 the orders and end-time tables come to about 1.3 MiB, and
// allocating them afresh each call costs more in page faults than the walk itself.
struct Scratch {
  std::vector<PipelineSlot> slots;
  std::vector<double> ends;
  std::vector<double> spans;
  std::vector<int> work;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

PipelineRun simulate(const Orders& o, const PipelineTimes& t, bool record_events) {
  const int p = o.p, m = o.m, v = o.v;
  const int virtual_stages = p * v;
  const size_t n = o.per_stage();
  // A transfer crosses between two stages unless there is only one (then a chunk's input comes
  // from the stage's own previous chunk).
  const double send_fwd = p > 1 ? t.send_forward : 0.0;
  const double send_bwd = p > 1 ? t.send_backward : 0.0;
  // Durations by (stage, chunk), flat.
  std::vector<double> dur(static_cast<size_t>(2) * p * v);
  for (int s = 0; s < p; ++s)
    for (int c = 0; c < v; ++c) {
      dur[(static_cast<size_t>(s) * v + c) * 2] = t.forward[s][c];
      dur[(static_cast<size_t>(s) * v + c) * 2 + 1] = t.backward[s][c];
    }
  // End time of each pass, [virtual stage][micro-batch] forward then backward tables; -1 until
  // it has run.
  const size_t table = static_cast<size_t>(virtual_stages) * m;
  Scratch& sc = scratch();
  std::vector<double>& ends = sc.ends;
  ends.assign(2 * table, -1.0);
  double* fwd_end = ends.data();
  double* bwd_end = ends.data() + table;
  std::vector<size_t> cursor(p, 0);
  std::vector<double> free_at(p, 0.0);
  std::vector<int> in_flight(p, 0);
  std::vector<double>& spans = sc.spans;  // start, end of each slot
  if (record_events) spans.assign(2 * n * p, 0.0);

  PipelineRun run;
  run.busy.assign(p, 0.0);
  run.peak_in_flight.assign(p, 0);
  double first_start = INFINITY, last_end = 0;

  // Stages that may advance. A finished pass wakes the one stage that consumes it; every pass
  // is settled once, so the walk is linear in the passes, and the recurrence (start = max(stage
  // free, input ready)) gives the same times in whatever order stages are visited.
  std::vector<int>& work = sc.work;
  work.clear();
  for (int s = p - 1; s >= 0; --s) work.push_back(s);
  while (!work.empty()) {
    const int stage = work.back();
    work.pop_back();
    const PipelineSlot* order = &o.at(stage, 0);
    const int next_stage = stage + 1 == p ? 0 : stage + 1;  // holds virtual stage k + 1
    const int prev_stage = stage == 0 ? p - 1 : stage - 1;  // holds virtual stage k − 1
    // The stage's state in locals while it advances (the tables written below could alias it).
    size_t i = cursor[stage];
    double free = free_at[stage];
    double busy = run.busy[stage];
    int held = in_flight[stage];
    int peak = run.peak_in_flight[stage];
    for (; i < n; ++i) {
      const PipelineSlot& slot = order[i];
      const int k = slot.chunk * p + stage;
      const size_t mb = static_cast<size_t>(slot.micro_batch);
      const bool fwd = slot.kind == PassKind::forward;
      double ready = 0;
      if (fwd) {
        if (k > 0) {
          const double dep = fwd_end[static_cast<size_t>(k - 1) * m + mb];
          if (dep < 0) break;
          ready = dep + send_fwd;
        }
      } else if (k + 1 < virtual_stages) {
        const double dep = bwd_end[static_cast<size_t>(k + 1) * m + mb];
        if (dep < 0) break;
        ready = dep + send_bwd;
      } else {
        // The last virtual stage turns its own forward's output into the loss gradient.
        ready = fwd_end[static_cast<size_t>(k) * m + mb];
        if (ready < 0) break;
      }
      const double start = std::max(free, ready);
      free = start + dur[(static_cast<size_t>(stage) * v + slot.chunk) * 2 + (fwd ? 0 : 1)];
      (fwd ? fwd_end : bwd_end)[static_cast<size_t>(k) * m + mb] = free;
      busy += free - start;
      first_start = std::min(first_start, start);
      if (record_events) {
        spans[2 * (stage * n + i)] = start;
        spans[2 * (stage * n + i) + 1] = free;
      }
      held += fwd ? 1 : -1;
      peak = std::max(peak, held);
      // Wake the stage that consumes this pass, when it is another one.
      if (p > 1) {
        if (fwd && k + 1 < virtual_stages) work.push_back(next_stage);
        else if (!fwd && k > 0) work.push_back(prev_stage);
      }
    }
    cursor[stage] = i;
    free_at[stage] = free;
    run.busy[stage] = busy;
    in_flight[stage] = held;
    run.peak_in_flight[stage] = peak;
  }
  for (int s = 0; s < p; ++s)
    if (cursor[s] < n) {
      const PipelineSlot& slot = o.at(s, cursor[s]);
      throw std::logic_error(fmt::format(
          "pipeline order deadlocks: stage {} waits at its pass {} ({} of micro-batch {}, chunk {}) for an "
          "input that never comes",
          s, cursor[s], kind_name(slot.kind), slot.micro_batch, slot.chunk));
    }

  for (int s = 0; s < p; ++s) last_end = std::max(last_end, free_at[s]);
  run.makespan = last_end - first_start;
  run.idle.resize(p);
  double max_busy = 0;
  for (int s = 0; s < p; ++s) {
    run.idle[s] = run.makespan - run.busy[s];
    max_busy = std::max(max_busy, run.busy[s]);
  }
  const double bubble = run.makespan - max_busy;
  run.bubble_fraction = run.makespan > 0 ? bubble / run.makespan : 0.0;
  run.bubble_ratio = max_busy > 0 ? bubble / max_busy : 0.0;
  if (record_events) {
    run.events.reserve(n * p);
    for (int s = 0; s < p; ++s)
      for (size_t i = 0; i < n; ++i)
        run.events.push_back({s, o.at(s, i), spans[2 * (s * n + i)] - first_start,
                              spans[2 * (s * n + i) + 1] - first_start});
  }
  return run;
}

}  // namespace

std::vector<PipelineSlot> pipeline_order(PipelineSchedule s, int p, int m, int v, int stage) {
  check_sizes(s, p, m, v);
  if (stage < 0 || stage >= p)
    throw ConfigError(fmt::format("pipeline stage {} is outside 0..{}", stage, p - 1));
  std::vector<PipelineSlot> out;
  out.reserve(static_cast<size_t>(2) * m * v);
  append_order(out, s, p, m, v, stage);
  return out;
}

PipelineRun simulate_pipeline(PipelineSchedule s, int p, int m, int v, const PipelineTimes& t,
                              bool record_events) {
  check_sizes(s, p, m, v);
  check_times(t, p, v);
  std::vector<PipelineSlot>& slots = scratch().slots;
  slots.clear();
  for (int stage = 0; stage < p; ++stage) append_order(slots, s, p, m, v, stage);
  return simulate(Orders{p, m, v, slots.data()}, t, record_events);
}

PipelineRun simulate_pipeline_orders(const std::vector<std::vector<PipelineSlot>>& orders, int m, int v,
                                     const PipelineTimes& t, bool record_events) {
  const int p = static_cast<int>(orders.size());
  if (p < 1 || m < 1 || v < 1)
    throw ConfigError(fmt::format(
        "a pipeline needs at least 1 stage, 1 micro-batch and 1 chunk per stage (got p={}, m={}, v={})",
        p, m, v));
  check_times(t, p, v);
  std::vector<PipelineSlot>& slots = scratch().slots;
  slots.clear();
  for (int s = 0; s < p; ++s) {
    check_order(orders[s], s, m, v);
    slots.insert(slots.end(), orders[s].begin(), orders[s].end());
  }
  return simulate(Orders{p, m, v, slots.data()}, t, record_events);
}

}  // namespace perfsim
