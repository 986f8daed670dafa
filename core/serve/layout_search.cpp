// search_serving_layouts: the engines enumerated (tp, pp), the services of each over the GPUs
// (replicas, or prefill/decode splits), the scheduler knobs; every engine and knob setting
// checked for room first (one KV block), so the services of an engine that does not fit are
// pruned without a run; the rest predicted over worker threads, then ranked (layout_search.hpp).
#include "core/serve/layout_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "core/errors.hpp"
#include "core/serve/capacity.hpp"
#include "core/serve/scheduler_config.hpp"
#include "core/serve/simulate.hpp"
#include "core/serve/step_price.hpp"

namespace perfsim {

namespace {

const std::vector<int64_t> default_max_batch = {64, 128, 256};
const std::vector<int64_t> default_chunk = {512, 2048};
// Below this KV use a slightly smaller pool (a larger max_batch's activations) admits alike.
constexpr double kv_spare_share = 0.9;

// The candidate's stack: the scenario's, its last step given the candidate's knobs. Passes
// appended after the step's own override them (scheduler_config reads them in order).
std::vector<StackStep> candidate_stack(const std::vector<StackStep>& stack, const SchedulerConfig& base,
                                       const ServeCandidate& c, bool continuous) {
  std::vector<StackStep> out = stack;
  StackStep& last = out.back();
  // kv_transfer is refused on a step that is not disaggregated: keep it only for a split.
  if (!c.disaggregated())
    std::erase_if(last.passes, [](const PassSpec& p) { return p.name == "kv_transfer"; });
  if (continuous) {
    // chunked_prefill replaces max_tokens as the tokens a step holds; both at once are refused.
    if (base.max_tokens > 0 && c.chunk > 0) last.passes.emplace_back("max_tokens", 0.0);
    last.passes.emplace_back("max_batch", static_cast<double>(c.max_batch));
    last.passes.emplace_back("chunked_prefill", static_cast<double>(c.chunk));
  }
  last.passes.emplace_back("prefill_engines", static_cast<double>(c.prefill_engines));
  last.passes.emplace_back("decode_engines", static_cast<double>(c.decode_engines));
  return out;
}

// Runs fn(i) for i in [0, n) over `threads` workers; the first exception other than a
// ConfigError (which fn handles itself) is rethrown once all have stopped.
template <class F>
void parallel_for(std::size_t n, int threads, F&& fn) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex mutex;
  auto worker = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  threads = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  if (failure) std::rethrow_exception(failure);
}

double ratio(const LatencyStats& s, double bound) { return bound > 0 && s.count > 0 ? s.p99 / bound : 0; }

}  // namespace

const char* name_of(ServeLimiter l) {
  switch (l) {
    case ServeLimiter::none: return "none";
    case ServeLimiter::kv_memory: return "kv_memory";
    case ServeLimiter::queue: return "queue";
    case ServeLimiter::ttft: return "ttft";
    case ServeLimiter::tpot: return "tpot";
    case ServeLimiter::e2e: return "e2e";
  }
  return "?";
}

const char* describe(ServeLimiter l) {
  switch (l) {
    case ServeLimiter::none: return "none (meets SLO)";
    case ServeLimiter::kv_memory: return "KV memory";
    case ServeLimiter::queue: return "queue";
    case ServeLimiter::ttft: return "TTFT";
    case ServeLimiter::tpot: return "TPOT";
    case ServeLimiter::e2e: return "E2E";
  }
  return "?";
}

ServeLimiter serve_limiter(const ServeMetrics& m, const Slo& slo, double attainment) {
  if (m.rejected > 0 || m.preemptions > 0 || m.kv_utilization_max >= kv_full_share) return ServeLimiter::kv_memory;
  if (m.slo_attainment >= attainment) return ServeLimiter::none;
  const double wait = slo.ttft > 0 ? slo.ttft : 1.0;
  if (m.queue.count > 0 && m.queue.p99 > wait) return ServeLimiter::queue;
  const double ttft = ratio(m.ttft, slo.ttft), tpot = ratio(m.tpot, slo.tpot), e2e = ratio(m.e2e, slo.e2e);
  if (ttft >= tpot && ttft >= e2e) return ServeLimiter::ttft;
  return tpot >= e2e ? ServeLimiter::tpot : ServeLimiter::e2e;
}

std::string layout_words(const ServeCandidate& c) {
  const std::string engine = engine_words(c.layout.tp, c.layout.pp);
  if (c.disaggregated()) return fmt::format("{}P{}D × {}", c.prefill_engines, c.decode_engines, engine);
  if (c.layout.dp > 1) return fmt::format("{} × {}", c.layout.dp, engine);
  return engine;
}

ServeSearchResult search_serving_layouts(const ModelConfig& m, const Hardware& hw, const ServeSpec& spec,
                                         const std::vector<Request>& requests, const std::vector<StackStep>& given,
                                         const ServeSearchSpace& space) {
  if (space.gpus < 1) throw ConfigError(fmt::format("gpus must be >= 1 (got {})", space.gpus));
  for (const std::vector<int>* list : {&space.tp, &space.pp})
    for (int d : *list)
      if (d < 1) throw ConfigError(fmt::format("--tp and --pp degrees must be >= 1 (got {})", d));
  const std::vector<StackStep> stack =
      given.empty() ? std::vector<StackStep>{StackStep{"baseline", {}, ""}} : given;
  const std::size_t last = stack.size() - 1;
  const SchedulerConfig base = scheduler_config(stack, last);

  ServeSearchResult out;
  out.model = m.name;
  out.hardware = hw.name;
  out.gpus = space.gpus;
  out.price_per_hour = hw.price_per_hour;
  out.slo = spec.slo;
  out.attainment = space.attainment;
  out.continuous = base.kind == SchedulerKind::continuous;
  // Splits only for open-loop traffic (the prefill engines run before the decode engines take
  // the arrivals their transfers give) and continuous engines, which alone hand requests over.
  out.open_loop = spec.arrivals.kind != ArrivalKind::closed;
  out.requests = static_cast<int64_t>(requests.size());

  std::vector<int> tps = space.tp, pps = space.pp;
  if (tps.empty()) {
    const int node = hw.gpus_per_node > 0 ? hw.gpus_per_node : 8;
    for (int t = 1; t <= node; t *= 2) tps.push_back(t);
  }
  if (pps.empty())
    for (int p : {1, 2, 4})
      if (p <= m.layers) pps.push_back(p);
  std::vector<int64_t> batches = {base.max_batch}, chunks = {base.chunked_prefill};
  if (out.continuous) {
    batches = space.max_batch.empty() ? default_max_batch : space.max_batch;
    chunks = space.chunk.empty() ? default_chunk : space.chunk;
  }

  // Enumeration: engine (tp, pp), service (replicas, then the splits), knobs.
  std::vector<ServeCandidate>& all = out.candidates;
  for (int tp : tps)
    for (int pp : pps) {
      const int g = tp * pp;
      if (space.gpus % g != 0) {
        ++out.engines_skipped;
        continue;
      }
      ParallelSpec engine;
      engine.tp = tp;
      engine.pp = pp;
      std::string invalid;
      try {
        Workload w;
        w.phase = Phase::decode;
        validate(engine, m, w);
      } catch (const ConfigError& e) {
        invalid = e.what();
      }
      const int engines = space.gpus / g;
      std::vector<std::pair<int, int>> services = {{0, 0}};
      if (engines >= 2 && out.open_loop && out.continuous)
        for (double share : space.prefill_shares) {
          const int p = std::clamp(static_cast<int>(std::lround(share * engines)), 1, engines - 1);
          if (std::find(services.begin(), services.end(), std::pair{p, engines - p}) == services.end())
            services.emplace_back(p, engines - p);
        }
      for (const auto& [prefill, decode] : services)
        for (int64_t batch : batches)
          for (int64_t chunk : chunks) {
            ServeCandidate c;
            c.layout = engine;
            c.layout.dp = prefill > 0 ? 1 : engines;
            c.prefill_engines = prefill;
            c.decode_engines = decode;
            c.max_batch = batch;
            c.chunk = chunk;
            c.pruned = invalid;
            all.push_back(std::move(c));
          }
    }

  const int threads =
      space.threads > 0 ? space.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  // Room first: an engine and knob setting whose KV pool holds not one block prunes every
  // service built of it without a run (the pool is sized before anything is simulated).
  using Key = std::tuple<int, int, int64_t, int64_t>;
  std::map<Key, std::string> room;
  for (const ServeCandidate& c : all)
    if (c.pruned.empty()) room.emplace(Key{c.layout.tp, c.layout.pp, c.max_batch, c.chunk}, "");
  std::vector<std::pair<const Key, std::string>*> checks;
  for (auto& kv : room) checks.push_back(&kv);
  parallel_for(checks.size(), threads, [&](std::size_t i) {
    const auto& [tp, pp, batch, chunk] = checks[i]->first;
    ServeCandidate c;
    c.layout.tp = tp;
    c.layout.pp = pp;
    c.max_batch = batch;
    c.chunk = chunk;
    try {
      const std::vector<StackStep> s = candidate_stack(stack, base, c, out.continuous);
      const SchedulerConfig config = scheduler_config(s, last);
      StepPricer pricer(m, hw, s, last, c.layout);
      (void)kv_pool(pricer, config, hw, m.max_seq, m.name);
    } catch (const DoesNotFit& e) {
      checks[i]->second = fmt::format("does not fit: {}", e.what());
    } catch (const ConfigError& e) {
      checks[i]->second = e.what();
    }
  });

  // The services that differ only in max_batch run in one job, smallest first: a run whose
  // batch never reached its max_batch, with the KV pool never near full, is the run every
  // larger max_batch gives, so those are not run again.
  using Group = std::tuple<int, int, int, int, int64_t>;
  std::map<Group, std::vector<std::size_t>> grouped;
  for (std::size_t i = 0; i < all.size(); ++i) {
    ServeCandidate& c = all[i];
    if (c.pruned.empty()) c.pruned = room.at(Key{c.layout.tp, c.layout.pp, c.max_batch, c.chunk});
    if (c.pruned.empty())
      grouped[Group{c.layout.tp, c.layout.pp, c.prefill_engines, c.decode_engines, c.chunk}].push_back(i);
  }
  std::vector<std::vector<std::size_t>> jobs;
  std::size_t total = 0;
  for (auto& [key, members] : grouped) {
    std::stable_sort(members.begin(), members.end(),
                     [&](std::size_t a, std::size_t b) { return all[a].max_batch < all[b].max_batch; });
    total += members.size();
    jobs.push_back(std::move(members));
  }

  std::mutex progress_mutex;
  std::size_t done = 0;
  auto tick = [&] {
    if (!space.progress) return;
    const std::lock_guard<std::mutex> lock(progress_mutex);
    space.progress(++done, total);
  };
  parallel_for(jobs.size(), threads, [&](std::size_t k) {
    std::string same;  // set once a run shows the larger max_batch values change nothing
    for (std::size_t index : jobs[k]) {
      ServeCandidate& c = all[index];
      if (!same.empty()) {
        c.pruned = same;
        tick();
        continue;
      }
      try {
        const std::vector<StackStep> s = candidate_stack(stack, base, c, out.continuous);
        const ServePrediction p = predict_serving(m, hw, spec, requests, s, last, c.layout);
        c.priced = true;
        c.metrics = p.metrics;
        c.max_batch = p.config.max_batch;
        c.chunk = p.config.chunked_prefill;
        c.goodput_per_gpu = p.metrics.goodput / space.gpus;
        c.output_per_gpu = p.metrics.output_throughput / space.gpus;
        c.cost_per_million = cost_per_million_tokens(hw.price_per_hour, c.output_per_gpu);
        c.limiter = serve_limiter(p.metrics, spec.slo, space.attainment);
        int64_t peak = 0;
        for (const StepRecord& st : p.run.steps) peak = std::max<int64_t>(peak, st.seqs);
        if (out.continuous && peak < c.max_batch && p.metrics.kv_utilization_max < kv_spare_share)
          same = fmt::format("same run as max_batch {}: at most {} sequences ran at once", c.max_batch, peak);
      } catch (const DoesNotFit& e) {
        c.pruned = fmt::format("does not fit: {}", e.what());
      } catch (const ConfigError& e) {
        c.pruned = e.what();
      }
      tick();
    }
  });

  std::stable_sort(all.begin(), all.end(), [](const ServeCandidate& a, const ServeCandidate& b) {
    if (a.priced != b.priced) return a.priced;
    if (!a.priced) return false;
    if (a.goodput_per_gpu != b.goodput_per_gpu) return a.goodput_per_gpu > b.goodput_per_gpu;
    return a.output_per_gpu > b.output_per_gpu;
  });
  for (const ServeCandidate& c : all)
    if (c.priced) {
      ++out.priced;
      if (meets_slo(c.metrics, space.attainment)) ++out.meeting;
    }
  return out;
}

}  // namespace perfsim
