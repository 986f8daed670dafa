// search_layouts: the layout space enumerated in a fixed order, pruned by the checks
// validate(ParallelSpec) makes (classified by reason), each remaining layout built with
// sampled layers and priced, then ranked (see search.hpp).
#include "core/parallel/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "core/parallel/layout_prediction.hpp"
#include "core/parallel/plan.hpp"

namespace perfsim {

const char* describe(PruneReason r) {
  switch (r) {
    case PruneReason::batch_split: return "global batch not a multiple of micro-batch × dp";
    case PruneReason::tp_split: return "tp does not divide the heads, KV heads or MLP width";
    case PruneReason::too_many_chunks: return "pp × interleave above the layers";
    case PruneReason::uneven_stages: return "layers not a multiple of pp × interleave (--uneven-pp keeps them)";
    case PruneReason::interleave_batches: return "interleaved with micro-batches not a multiple of pp";
    case PruneReason::cp_split: return "sequence not a multiple of 2 × cp";
    case PruneReason::ep_split: return "ep does not divide dp";
    case PruneReason::invalid_other: return "other invalid layout";
    case PruneReason::does_not_fit: return "does not fit memory";
  }
  return "?";
}

const char* name_of(PruneReason r) {
  switch (r) {
    case PruneReason::batch_split: return "batch_split";
    case PruneReason::tp_split: return "tp_split";
    case PruneReason::too_many_chunks: return "too_many_chunks";
    case PruneReason::uneven_stages: return "uneven_stages";
    case PruneReason::interleave_batches: return "interleave_batches";
    case PruneReason::cp_split: return "cp_split";
    case PruneReason::ep_split: return "ep_split";
    case PruneReason::invalid_other: return "invalid_other";
    case PruneReason::does_not_fit: return "does_not_fit";
  }
  return "?";
}

const char* name_of(Limiter l) {
  switch (l) {
    case Limiter::compute: return "compute";
    case Limiter::memory: return "memory";
    case Limiter::bubble: return "bubble";
    case Limiter::communication: return "communication";
  }
  return "?";
}

namespace {

// Steps 0..upto with their graph passes only: workload passes are applied to the workload
// beforehand and each candidate sets its own layout (and recompute, when searched).
std::vector<StackStep> graph_stack(const std::vector<StackStep>& stack, std::size_t upto, bool drop_recompute) {
  std::vector<StackStep> out;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i) {
    StackStep s{stack[i].name, {}, stack[i].where};
    for (const PassSpec& p : stack[i].passes) {
      if (is_kind(p, OptimizationKind::workload) || is_kind(p, OptimizationKind::parallel) ||
          (drop_recompute && p.name == "recompute"))
        continue;
      s.passes.push_back(p);
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) out.push_back(StackStep{"baseline", {}, ""});
  return out;
}

std::vector<int> divisors(int n, int most) {
  std::vector<int> out;
  for (int d = 1; d <= std::min(n, most); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

std::vector<int> powers_of_two_dividing(int n, int most) {
  std::vector<int> out;
  for (int d = 1; d <= std::min(n, most); d *= 2)
    if (n % d == 0) out.push_back(d);
  return out;
}

template <typename T>
std::vector<T> sorted_unique(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

template <typename T>
void check_candidates(const std::vector<T>& v, const char* field, T low) {
  if (v.empty()) throw ConfigError(fmt::format("search: {} has no candidates; give at least one", field));
  for (T x : v)
    if (x < low) throw ConfigError(fmt::format("search: {} candidates must be >= {} (got {})", field, low, x));
}

// A layout to price: its spec, workload and whether it recomputes.
struct Job {
  ParallelSpec layout;
  Workload workload;
  bool recompute = false;
};

// Why `p` on `w` cannot run, in the order the reasons are checked; nullopt when it can.
std::optional<PruneReason> prune(const ParallelSpec& p, const ModelConfig& m, const Workload& w, bool uneven,
                                 std::string& message) {
  const bool train = w.phase == Phase::train;
  const int64_t kv = m.kv_heads_or_heads();
  const int64_t expert = m.moe() ? m.expert_width() : m.ffn_hidden;
  if (m.heads % p.tp != 0 || kv % p.tp != 0 || m.ffn_hidden % p.tp != 0 || expert % p.tp != 0)
    return PruneReason::tp_split;
  const int64_t chunks = static_cast<int64_t>(p.pp) * p.interleave;
  if (chunks > m.layers) return PruneReason::too_many_chunks;
  if (!uneven && m.layers % chunks != 0) return PruneReason::uneven_stages;
  if (train && p.interleave > 1 && w.grad_accum % p.pp != 0) return PruneReason::interleave_batches;
  const int64_t tokens = train ? w.seq : w.prompt;
  if (p.cp > 1 && tokens % (2 * p.cp) != 0) return PruneReason::cp_split;
  if (p.dp % p.ep != 0) return PruneReason::ep_split;
  try {
    validate(p, m, w, p.gpus());
  } catch (const ConfigError& e) {
    message = e.what();
    return PruneReason::invalid_other;
  }
  return std::nullopt;
}

Limiter limiter_of(const LayoutPrediction& lp, const Hardware& hw) {
  const double headroom = hw.memory_bytes > 0 ? 1.0 - lp.memory_peak / hw.memory_bytes : 1.0;
  if (!lp.fits || headroom < limiter_share) return Limiter::memory;
  const double bubble = lp.bubble_fraction * lp.step_time;
  const double comm = lp.exposed_communication;
  if (std::max(bubble, comm) < limiter_share * lp.step_time) return Limiter::compute;
  return bubble >= comm ? Limiter::bubble : Limiter::communication;
}

SearchCandidate evaluate(const Job& job, const ModelConfig& m, const std::vector<StackStep>& stack,
                         const Hardware& hw, int64_t layers) {
  const std::vector<RankGraph> ranks = build_rank_graphs(m, job.workload, stack, stack.size() - 1, job.layout, layers);
  const LayoutPrediction lp = predict_layout(ranks, job.layout, hw);
  SearchCandidate c;
  c.layout = job.layout;
  c.micro_batch = job.workload.batch;
  c.grad_accum = job.workload.phase == Phase::train ? job.workload.grad_accum : 1;
  c.recompute = job.recompute;
  c.tokens_per_second = lp.tokens_per_second;
  c.tokens_per_second_per_gpu = lp.tokens_per_second_per_gpu;
  c.mfu = lp.mfu;
  c.step_time = lp.step_time;
  c.bubble_fraction = lp.bubble_fraction;
  c.bubble_time = lp.bubble_fraction * lp.step_time;
  c.exposed_communication = lp.exposed_communication;
  c.memory_peak = lp.memory_peak;
  c.worst_rank = lp.worst_rank;
  c.fits = lp.fits;
  c.limiter = limiter_of(lp, hw);
  return c;
}

}  // namespace

SearchResult search_layouts(const ModelConfig& m, const Workload& w, const std::vector<StackStep>& stack,
                            std::size_t upto, const ParallelSpec& base, const Hardware& hw,
                            const SearchSpace& space) {
  if (space.gpus < 1) throw ConfigError(fmt::format("search: gpus must be >= 1 (got {})", space.gpus));
  if (space.layers < 0) throw ConfigError(fmt::format("search: layers must be >= 0 (got {})", space.layers));

  // The step's workload: its workload passes (batch, kv_cache) applied.
  Workload wl = w;
  for (std::size_t i = 0; i <= upto && i < stack.size(); ++i)
    for (const PassSpec& p : stack[i].passes) (void)apply_workload_pass(p, wl);
  const bool train = wl.phase == Phase::train;

  SearchResult out;
  out.model = m.name;
  out.hardware = hw.name;
  out.workload = wl;
  out.gpus = space.gpus;
  out.memory_bytes = hw.memory_bytes;
  out.global_batch = space.global_batch > 0 ? space.global_batch
                                            : wl.batch * (train ? wl.grad_accum : 1) * base.dp;
  const int64_t global = out.global_batch;

  // The candidates of each dimension.
  const int node = hw.gpus_per_node > 0 ? hw.gpus_per_node : 8;
  const std::vector<int> tps = sorted_unique(space.tp.empty() ? powers_of_two_dividing(space.gpus, node) : space.tp);
  const std::vector<int> pps =
      sorted_unique(space.pp.empty() ? divisors(space.gpus, static_cast<int>(std::min<int64_t>(m.layers, 1 << 20)))
                                     : space.pp);
  std::vector<int> cps = space.cp;
  if (cps.empty()) {
    cps = {1};
    if (space.search_cp) {
      const int64_t tokens = train ? wl.seq : wl.prompt;
      for (int c : powers_of_two_dividing(space.gpus, 16))
        if (c > 1 && tokens % (2 * c) == 0) cps.push_back(c);
    }
  }
  cps = sorted_unique(cps);
  std::vector<int64_t> mbs = space.micro_batches;
  if (mbs.empty()) mbs = {1, 2, 4, 8, wl.batch};
  mbs = sorted_unique(mbs);
  const std::vector<int> vs = sorted_unique(space.interleave.empty() ? std::vector<int>{1, 2, 4} : space.interleave);
  const std::vector<int> zeros = sorted_unique(space.zero.empty() ? std::vector<int>{0, 1, 2, 3} : space.zero);
  std::vector<int> eps = space.ep;
  if (eps.empty()) eps = m.moe() ? powers_of_two_dividing(static_cast<int>(m.experts), static_cast<int>(m.experts))
                                 : std::vector<int>{1};
  eps = sorted_unique(eps);
  check_candidates(tps, "tp", 1);
  check_candidates(pps, "pp", 1);
  check_candidates(cps, "cp", 1);
  check_candidates<int64_t>(mbs, "micro-batch", 1);
  check_candidates(vs, "interleave", 1);
  check_candidates(zeros, "zero", 0);
  check_candidates(eps, "ep", 1);
  for (int z : zeros)
    if (z > 3) throw ConfigError(fmt::format("search: zero candidates must be 0-3 (got {})", z));

  // Enumerate in a fixed order: tp, cp, pp, micro-batch, interleave, zero, ep, sp, recompute.
  std::vector<Job> jobs;
  auto count_pruned = [&out](PruneReason r) { ++out.pruned[static_cast<int>(r)]; };
  for (int tp : tps)
    for (int cp : cps)
      for (int pp : pps) {
        const int64_t shards = static_cast<int64_t>(tp) * cp * pp;
        if (space.gpus % shards != 0) continue;  // not a layout of these GPUs: not enumerated
        const int dp = static_cast<int>(space.gpus / shards);
        // Inference: the global batch split over the replicas, one micro-batch.
        const std::vector<int64_t> batches = train ? mbs : std::vector<int64_t>{std::max<int64_t>(1, global / dp)};
        const std::vector<int> chunk_options = train && pp > 1 ? vs : std::vector<int>{1};
        const std::vector<int> zero_options = train && dp > 1 ? zeros : std::vector<int>{0};
        const std::vector<bool> sp_options = tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
        const std::vector<bool> recompute_options =
            train && space.search_recompute ? std::vector<bool>{false, true} : std::vector<bool>{false};
        for (int64_t mb : batches)
          for (int v : chunk_options)
            for (int zero : zero_options)
              for (int ep : eps)
              for (bool sp : sp_options)
                for (bool recompute : recompute_options) {
                  if (++out.enumerated % 256 == 0) check_deadline();
                  if (global % (mb * dp) != 0) {
                    count_pruned(PruneReason::batch_split);
                    continue;
                  }
                  Job job;
                  job.recompute = recompute;
                  job.workload = wl;
                  job.workload.batch = mb;
                  if (train) job.workload.grad_accum = global / (mb * dp);
                  ParallelSpec& p = job.layout;
                  p = base;
                  p.dp = dp;
                  p.tp = tp;
                  p.pp = pp;
                  p.cp = cp;
                  p.ep = ep;
                  p.sp = sp;
                  p.zero = zero;
                  p.fsdp = FsdpStrategy::none;
                  p.interleave = v;
                  p.node_gpus = hw.gpus_per_node;  // the nodes it is priced on
                  if (v > 1)
                    p.schedule = PipelineSchedule::interleaved;
                  else if (p.schedule == PipelineSchedule::interleaved)
                    p.schedule = PipelineSchedule::one_f_one_b;
                  std::string message;
                  if (const auto why = prune(p, m, job.workload, space.uneven_pp, message)) {
                    count_pruned(*why);
                    if (*why == PruneReason::invalid_other && out.invalid_example.empty())
                      out.invalid_example = message;
                    continue;
                  }
                  jobs.push_back(std::move(job));
                }
      }

  // Price the layouts over worker threads; each result lands at its job's index, so the
  // outcome does not depend on the threads.
  const std::vector<StackStep> plain = graph_stack(stack, upto, space.search_recompute);
  std::vector<StackStep> recomputing = plain;
  recomputing.push_back(StackStep{"+recompute", {PassSpec{"recompute", {}}}, ""});
  std::vector<std::optional<SearchCandidate>> priced(jobs.size());
  std::vector<std::string> refused(jobs.size());
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  std::size_t done = 0;  // under failure_mutex
  auto worker = [&]() {
    for (std::size_t i = next++; i < jobs.size(); i = next++) {
      try {
        priced[i] = evaluate(jobs[i], m, jobs[i].recompute ? recomputing : plain, hw, space.layers);
      } catch (const ConfigError& e) {
        refused[i] = e.what();  // a builder or pass refused the layout
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
      if (space.progress) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        ++done;
        if (done % 8 == 0 || done == jobs.size()) space.progress(done, jobs.size());
      }
    }
  };
  int threads = space.threads > 0 ? space.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  if (failure) std::rethrow_exception(failure);

  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!priced[i]) {
      count_pruned(PruneReason::invalid_other);
      if (out.invalid_example.empty()) out.invalid_example = refused[i];
      continue;
    }
    ++out.evaluated;
    if (priced[i]->fits)
      ++out.fitting;
    else
      count_pruned(PruneReason::does_not_fit);
    out.layouts.push_back(std::move(*priced[i]));
  }
  std::stable_sort(out.layouts.begin(), out.layouts.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
    if (a.fits != b.fits) return a.fits;
    return a.tokens_per_second > b.tokens_per_second;
  });
  return out;
}

}  // namespace perfsim
