// CudaBackend: device facts, what it can run, the timed eager and graph-replay loops with
// their time-bounded warm-up.
#include "backends/cuda/cuda_backend.hpp"

#include <nvtx3/nvToolsExt.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_graph_runner.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/cuda/cuda_vocab_parallel.hpp"
#include "backends/cuda/kernel_trace.hpp"
#include "backends/common/measurement.hpp"
#include "backends/common/timed_runs.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {


CudaBackend::CudaBackend() {
  if (!gpu_present()) throw NotExecutable("cuda backend: no CUDA device is visible");
  (void)KernelTrace::requested();  // a bad PERFSIM_OP_TIMING stops the run before anything executes
  PERFSIM_CUDA_CHECK(cudaSetDevice(0));
  PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  m_alloc = std::make_unique<CachingAllocator>(0);
  m_gemm = std::make_unique<GemmEngine>();
}

CudaBackend::~CudaBackend() {
  m_gemm.reset();
  m_alloc.reset();
  if (m_stream != nullptr) (void)cudaStreamDestroy(m_stream);
}

DeviceInfo CudaBackend::device() const {
  DeviceInfo d = query_device(0);
  if (d.catalog_name.empty()) d.name += " (no hardware catalog entry: predictions need --hardware)";
  return d;
}

std::string CudaBackend::unsupported_reason(const Op& op, const Graph& g) const {
  return m_ranks != nullptr ? rank_op_unsupported_reason(op, g) : op_unsupported_reason(op, g);
}

void CudaBackend::join_ranks(Communicator* ranks) {
  m_gemm->watch(nullptr);
  m_ranks.reset();
  if (ranks != nullptr) m_ranks = std::make_unique<NcclRanks>(*ranks);
  m_gemm->watch(m_ranks.get());
}

namespace {

// Warm-up lasts a minimum wall time as well as a count: the first passes of a process run
// while the GPU and CPU clocks ramp up from idle and while caches, the allocator's free
// lists and cuBLASLt's plans settle. Decode steps are a few ms, so one pass (the count
// alone) measured them before the clocks settled, and two processes disagreed by up to 50%.
// The time runs from the end of the first pass: that pass does one-time work (GEMM
// autotuning, lazy loading of kernel modules, a graph's upload) that can alone last longer.
constexpr double min_warmup_seconds = 0.2;
// A safeguard only: steps of ~20 us or more reach the time first.
constexpr int max_warmup_passes = 10000;

// Runs pass() at least `passes` times and, unless passes is 0 (a cold measurement was asked
// for), until min_warmup_seconds have passed since the first pass ended, at most
// max(passes, max_warmup_passes) times. Returns how many passes ran.
template <class F>
int warm_up(int passes, F&& pass) {
  if (passes <= 0) return 0;
  pass();
  const auto start = std::chrono::steady_clock::now();
  const int cap = std::max(passes, max_warmup_passes);
  int done = 1;
  for (;;) {
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
    if (done >= cap || (done >= passes && spent.count() >= min_warmup_seconds)) break;
    pass();
    ++done;
  }
  return done;
}

// Σ median / Σ median × count of eager op times: how the replay of the built layers scales to
// the whole model when the replay itself has no per-op times (timed capture refused).
double count_scale(const Measurement& eager, const Graph& g) {
  double built = 0, scaled = 0;
  for (std::size_t i = 0; i < eager.ops.size(); ++i) {
    built += eager.ops[i].median;
    scaled += eager.ops[i].median * g.ops[i].count;
  }
  return built > 0 ? scaled / built : 1.0;
}

// The events that time each op (event nodes inside a replay, event records between eager
// launches) cost a few µs per op (about 4 on an H100, docs/PERFORMANCE.md), part of it inside
// the op's own interval: the times of small kernels read high and their sum exceeds the same
// step run without the events. On one stream the probe cost is estimated as
// (Σ op medians − untimed step) / ops and taken off every sample (not below 0), so the op
// times add up to the step as it runs. With side streams the op times overlap and their sum is
// not the step: no correction there.
void remove_probe_cost(std::vector<std::vector<double>>& samples, double untimed_wall, const Graph& g) {
  if (g.ops.empty() || std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.stream != 0; }))
    return;
  double sum = 0;
  for (const std::vector<double>& s : samples) sum += median_or_zero(s);
  const double per_op = (sum - untimed_wall) / static_cast<double>(g.ops.size());
  if (per_op <= 0) return;
  for (std::vector<double>& s : samples)
    for (double& t : s) t = std::max(0.0, t - per_op);
}

}  // namespace

Measurement CudaBackend::run(const Graph& g, const RunOptions& o) {
  if (const std::string why = graph_unsupported_reason(*this, g); !why.empty()) throw NotExecutable(why);
  m_alloc->reset_peak();
  // A range around the step's passes (nsys shows it above the ops' own ranges).
  if (!o.label.empty()) nvtxRangePushA(o.label.c_str());
  struct RangeEnd {
    bool open;
    ~RangeEnd() {
      if (open) nvtxRangePop();
    }
  } range_end{!o.label.empty()};
  GraphRunner runner(g, o.seed, *m_alloc, *m_gemm, m_stream, m_ranks.get());

  Measurement m = g.graphed ? run_replayed(runner, g, o) : run_eager(runner, g, o);
  const CachingAllocator& alloc = runner.allocator();
  m.peak_bytes = alloc.peak_bytes();
  for (TensorRole r : all_tensor_roles) m.bytes_by_role_at_peak[r] = 0;
  for (const auto& [r, b] : alloc.bytes_by_role_at_peak()) m.bytes_by_role_at_peak[r] = b;
  return m;
}

Measurement CudaBackend::run_eager(GraphRunner& runner, const Graph& g, const RunOptions& o) {
  const int warmed = warm_up(std::max(0, o.warmup), [&] { (void)runner.run_once(); });
  // Passes with and without per-op events alternate: the first give the op times, the second
  // the step as it runs (executed_wall) and so the events' cost. With device_times, the same
  // pair again with the stream held until the step is issued: the ops' device times.
  std::vector<std::vector<double>> samples(g.ops.size()), host(g.ops.size()), held(g.ops.size());
  std::vector<double> walls, held_walls, totals;
  std::vector<std::vector<double>> starts, ends;  // per timed run: each op's offsets in it
  TimedRuns runs(o.repeats, o.min_time);
  while (runs.next()) {
    totals.push_back(runner.run_once(&samples));
    starts.emplace_back();
    ends.emplace_back();
    runner.op_offsets(starts.back(), ends.back());
    walls.push_back(runner.run_walled(&host));
    if (!o.device_times) continue;
    (void)runner.run_held(&held);
    if (const std::optional<double> w = runner.run_held()) held_walls.push_back(*w);
  }
  remove_probe_cost(samples, median_or_zero(walls), g);
  Measurement m = summarize_runs(g, samples, walls, name(), device().name, warmed, runs.count());
  keep_median_run(m, totals, starts, ends);
  for (std::size_t i = 0; i < m.ops.size(); ++i) m.ops[i].host = median_or_zero(host[i]);
  if (!held_walls.empty()) {
    remove_probe_cost(held, median_or_zero(held_walls), g);
    for (std::size_t i = 0; i < m.ops.size(); ++i) m.ops[i].device = median_or_zero(held[i]);
    m.op_timing = "events";
  }
  return m;
}

Measurement CudaBackend::run_replayed(GraphRunner& runner, const Graph& g, const RunOptions& o) {
  const int warmup = std::max(0, o.warmup);
  // One eager pass before capturing: it tunes the GEMM plans, uploads the fused-AdamW
  // descriptors and fills the allocator's cache with the step's blocks.
  (void)runner.run_once();
  runner.capture();
  if (runner.traces_ops()) {
    if (std::optional<Measurement> m = run_traced(runner, g, o)) return *m;
    fmt::print(stderr, "perfsim: cuda backend: CUPTI missed ops of the CUDA graph; timing them with event nodes\n");
  }
  if (const std::string why = runner.capture_timed(); !why.empty()) {
    // A driver without event-record nodes: the per-op figures come from eager passes and
    // the replay is scaled by their count ratio (less stable: eager noise enters the step).
    fmt::print(stderr, "perfsim: cuda backend: no per-op times inside the CUDA graph ({}); using eager op times\n", why);
    RunOptions eager = o;
    eager.device_times = false;
    Measurement m = run_eager(runner, g, eager);
    const int replays = warm_up(warmup, [&] { (void)runner.replay(1); });
    const double replay = median_or_zero(runner.replay(m.repeats));
    m.warmup += 1 + replays;
    m.executed_wall = replay;
    m.step_time = replay * count_scale(m, g);
    m.graph_replayed = true;
    return m;
  }
  // Warm-up launches both variants (a graph's first launch also uploads it to the device).
  const int replays = warm_up(warmup, [&] {
    (void)runner.replay(1);
    (void)runner.replay_timed(1);
  });
  // The untimed and timed replays alternate, so both see the same clock and cache state.
  std::vector<std::vector<double>> samples(g.ops.size());
  std::vector<double> walls;
  TimedRuns runs(o.repeats, o.min_time);
  while (runs.next()) {
    walls.push_back(runner.replay(1).at(0));
    (void)runner.replay_timed(1, &samples);
  }
  remove_probe_cost(samples, median_or_zero(walls), g);
  // ops/time_by_class: the event nodes' per-op times less their probe cost; step_time: their
  // stream timeline (× count); executed_wall: the step as captured, without event nodes.
  Measurement m = summarize_runs(g, samples, walls, name(), device().name, 1 + replays, runs.count());
  m.graph_replayed = true;
  m.op_timing = "event nodes";
  return m;
}

std::optional<Measurement> CudaBackend::run_traced(GraphRunner& runner, const Graph& g, const RunOptions& o) {
  std::vector<std::vector<double>> scratch(g.ops.size());
  const int replays = warm_up(std::max(0, o.warmup), [&] {
    (void)runner.replay(1);
    (void)runner.replay_traced(scratch);
  });
  // Plain and traced replays alternate, so both see the same clock and cache state; the plain
  // ones give the step as it runs (CUPTI's records cost time between a replay's kernels).
  std::vector<std::vector<double>> samples(g.ops.size());
  std::vector<double> walls;
  TimedRuns runs(o.repeats, o.min_time);
  while (runs.next()) {
    walls.push_back(runner.replay(1).at(0));
    if (!runner.replay_traced(samples)) return std::nullopt;
  }
  // ops/time_by_class: the device's records of each op; step_time: their stream timeline
  // (× count); executed_wall: the replays without records.
  Measurement m = summarize_runs(g, samples, walls, name(), device().name, 1 + replays, runs.count());
  m.graph_replayed = true;
  m.op_timing = "CUPTI records";
  return m;
}

std::vector<std::vector<float>> CudaBackend::evaluate(const Graph& g, uint64_t seed, const std::vector<int>& ids,
                                                      const std::map<int, std::vector<int32_t>>& writes) {
  if (const std::string why = graph_unsupported_reason(*this, g); !why.empty()) throw NotExecutable(why);
  GraphRunner runner(g, seed, *m_alloc, *m_gemm, m_stream, m_ranks.get());
  for (const auto& [id, values] : writes) runner.write(id, values);
  std::vector<char> keep(g.tensors.size(), 0);
  for (int id : ids) keep.at(static_cast<std::size_t>(id)) = 1;
  if (g.graphed) {
    (void)runner.run_once(nullptr, &keep);  // uploads AdamW descriptors, warms the cache
    runner.reset_persistent();
    runner.capture(&keep);
    (void)runner.replay(1);
  } else {
    (void)runner.run_once(nullptr, &keep);
  }
  std::vector<std::vector<float>> out;
  out.reserve(ids.size());
  for (int id : ids) out.push_back(runner.read(id));
  return out;
}

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace perfsim::cuda
