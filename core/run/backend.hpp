// The narrow interface every execution backend implements: what the device is, whether it
// can run an op, and running a graph with real kernels and allocations. Implementations live
// in backends/<name>/; backends/registry.hpp creates them by name.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/errors.hpp"
#include "core/graph/graph.hpp"
#include "core/run/communicator.hpp"
#include "core/run/execute_counts.hpp"
#include "core/run/results.hpp"

namespace perfsim {

struct DeviceInfo {
  std::string backend;        // "cpu", "cuda"
  std::string name;           // marketing name as the device reports it
  std::string catalog_name;   // closest hardware catalog entry ("host-cpu", "H100-SXM")
  int compute_units = 0;      // cores or SMs
  double memory_bytes = 0;
  double l2_bytes = 0;
  double clock_hz = 0;
  std::string driver;         // driver version ("580.65" on a GPU, "" on a CPU)
  std::string runtime;        // CUDA runtime version, or the CPU backend's BLAS and threads
};

struct RunOptions {
  int warmup = default_warmup_runs;
  int repeats = default_timed_runs;
  uint64_t seed = 42;
  // Eager CUDA runs: also time each op with the stream held until the step is issued
  // (OpMeasurement::device). Calibration, which fits the eager pacing itself, turns it off.
  bool device_times = true;
  // Seconds the timed runs last at least: past `repeats`, more runs until then (at most
  // max_timed_runs, backends/common/timed_runs.hpp). 0: exactly `repeats`.
  double min_time = 0;
  // What the run is, for profilers: "SCENARIO / STEP" (and "· rank R" on ranks); the CUDA
  // backend names an NVTX range after it around the step's passes. Empty: no range.
  std::string label;
};

// The int32 values a serving step's graph reads, by tensor name (engine_input in
// core/builders/builders.hpp), each exactly as many as the tensor holds.
using StepInputs = std::vector<std::pair<std::string, std::vector<int32_t>>>;

struct StepTimes {
  double wall = 0;    // from the first input written until the device finished the step
  double device = 0;  // of that, the device's own time (GPU events; the CPU: the same as wall)
  std::vector<double> ops;  // run_step_ops: each op's seconds, by op index
};

// A serving engine on a backend: the weights and the KV page pool live across its steps, and
// each step, a graph of its own, runs once as it comes (no warm-up, no repeats).
class EngineSession {
 public:
  virtual ~EngineSession() = default;
  // Runs one step: weights and KV pages are the session's (made the first time a graph names
  // them, weights filled as the backend fills any graph's, pages empty), the step's inputs
  // written before it runs. Throws NotExecutable when the step cannot run.
  virtual StepTimes run_step(const Graph& g, const StepInputs& inputs) = 0;
  // run_step, each op timed on its own (CUDA: an event pair around each op, which the step's
  // device time then includes, the stream held until the step is issued): StepTimes::ops. For
  // looking into one step and calibrating the engine's kernels, not for serving.
  virtual StepTimes run_step_ops(const Graph& g, const StepInputs& inputs) = 0;
  // A step replayed from a CUDA graph captured for `key` (its padded batch size): the first
  // step of a key runs eagerly from build()'s graph and is then captured (its seconds in
  // `capture_seconds`, which are not the step's); later ones write their inputs into the
  // captured graph's and replay it. A backend without graphs runs every step eagerly.
  virtual StepTimes run_graphed(int64_t key, const std::function<Graph()>& build, const StepInputs& inputs,
                                double& capture_seconds) {
    (void)key;
    capture_seconds = 0;
    return run_step(build(), inputs);
  }
  // Drops the captured graphs (their weights may change with the next stack step).
  virtual void forget_graphs() {}
  // Moves `bytes` of KV blocks to host memory (out) or back, as a swap preemption does;
  // returns its seconds.
  virtual double swap(double bytes, bool out) = 0;
  // Bytes the session holds across steps (weights and pages).
  [[nodiscard]] virtual double held_bytes() const = 0;
  // A disaggregated engine's KV hand-off between ranks: the pages of `blocks` (ids in this
  // session's pool; every layer's K and V) go to rank `peer`, which takes as many blocks into
  // blocks of its own pool with receive_pages. Each returns once its side is done. Throws
  // NotExecutable where the session cannot: not under ranks, or no pages made yet.
  virtual void send_pages(const std::vector<int64_t>& blocks, int peer) {
    (void)blocks;
    (void)peer;
    throw NotExecutable("this backend's engine does not send KV pages between ranks");
  }
  virtual void receive_pages(const std::vector<int64_t>& blocks, int peer) {
    (void)blocks;
    (void)peer;
    throw NotExecutable("this backend's engine does not receive KV pages between ranks");
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual DeviceInfo device() const = 0;
  // Empty when the op can run; otherwise the reason ("cpu backend has no fp8 GEMM").
  [[nodiscard]] virtual std::string unsupported_reason(const Op& op, const Graph& g) const = 0;
  // Executes every op of the graph in order with real buffers: warm-up runs, then timed runs.
  // Throws NotExecutable when something cannot run (check unsupported_reason first).
  [[nodiscard]] virtual Measurement run(const Graph& g, const RunOptions& o) = 0;

  // Runs as one rank of a parallel run from now on: the graphs' collective ops go through
  // `ranks` (nullptr: one device again). Throws NotExecutable when the backend cannot.
  virtual void join_ranks(Communicator* ranks) {
    if (ranks != nullptr) throw NotExecutable(name() + " backend does not run as one of several ranks yet");
  }

  // A serving engine's session on this backend (one at a time; its graphs' random values
  // come from `seed`). Throws NotExecutable when the backend cannot run one.
  [[nodiscard]] virtual std::unique_ptr<EngineSession> open_engine(uint64_t seed) {
    (void)seed;
    throw NotExecutable(name() + " backend does not run a serving engine");
  }

  // GPUs of this process a collective can span (1: collectives cannot be timed).
  [[nodiscard]] virtual int gpu_count() const { return 1; }
  // Seconds per collective `c` over the first `group` GPUs, one figure per entry of
  // `payload_bytes` (the buffer size collective_time() prices: the largest buffer of one rank,
  // the size nccl-tests reports). Throws NotExecutable when the backend has no collectives.
  [[nodiscard]] virtual std::vector<double> time_collective(Collective c, int group,
                                                            const std::vector<double>& payload_bytes) {
    (void)group;
    (void)payload_bytes;
    throw NotExecutable(name() + " backend cannot time collectives (" + std::string(name_of(c)) + ")");
  }
};

// The first unsupported op's reason, or "" when the whole graph can run.
[[nodiscard]] std::string graph_unsupported_reason(const Backend& b, const Graph& g);
// The id of an engine step's input `name` (engine_input); throws NotExecutable naming
// `backend` when the step has none.
[[nodiscard]] int step_input_id(const Graph& g, const std::string& name, std::string_view backend);

}  // namespace perfsim
