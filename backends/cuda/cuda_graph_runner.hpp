// Executes a graph on one GPU with the memory model's allocation schedule: persistent
// tensors allocated, filled on the host with host::fill_persistent (the CPU backend's values)
// and copied once; each activation allocated right before the op that writes it and
// released right after its last use (core/cost/memory_model.hpp last_use). Host tensors live in
// host memory (pageable or pinned, cuda_host_memory.hpp) outside the tracked device peak.
// Ops run on one CUDA stream per distinct Op::stream, ordered by the fork/join events of
// cuda_stream_plan.hpp. Eager passes time every op with a pair of CUDA events on its own
// stream; capture() records the same pass (the same allocation walk, so the same buffers
// and the same tracked peak; side streams join the capture through the fork events) into a
// CUDA graph that replay() launches. capture_timed() records a second variant with an
// event-record node before and after each op (on the op's stream), whose replays give the
// per-op times of a replayed step; where CUPTI is asked for and at hand (kernel_trace.hpp),
// capture() also notes which graph nodes each op made, and replay_traced() times the
// event-free graph op by op from the device's own records instead. NVTX ranges carry the op names.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cuda/cuda_allocator.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "backends/cuda/cuda_host_memory.hpp"
#include "backends/cuda/cuda_op_exec.hpp"
#include "backends/cuda/cuda_shared_tensors.hpp"
#include "backends/cuda/cuda_stream_plan.hpp"
#include "backends/cuda/kernel_trace.hpp"
#include "backends/cuda/nccl_ranks.hpp"
#include "backends/cuda/stream_hold.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cuda {

class GraphRunner {
 public:
  // Checks the graph and every op, allocates and fills the persistent tensors. Throws
  // NotExecutable for ops this backend cannot run and for graphs that do not fit.
  // With `ranks`, the graph is one rank's of a parallel run: shards start from the rank's part
  // of their whole (host::fill_persistent), collective ops go through NCCL, vocabulary-parallel
  // ops exchange their row statistics through it (cuda_vocab_parallel.hpp), and every wait for
  // the device polls the NCCL communicators for errors (stream_wait.hpp: an error aborts them
  // and throws NcclError rather than waiting for ever).
  // With `shared`, weights and KV caches come from it (cuda_shared_tensors.hpp): those it lacks
  // are added and filled (KV caches zeroed), those it holds keep their values. Without
  // `op_events` no per-op timing events are made (a step run once by run_walled(), as a
  // serving engine runs each of its steps): run_once(op_seconds), run_held and the timed
  // captures then throw.
  GraphRunner(const Graph& g, uint64_t seed, CachingAllocator& alloc, GemmEngine& gemm, cudaStream_t stream,
              NcclRanks* ranks = nullptr, SharedTensors* shared = nullptr, bool op_events = true);
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;
  ~GraphRunner();

  // One eager pass over the ops. op_seconds: op i's event time appended to (*op_seconds)[i];
  // returns the pass's GPU time (an event on stream 0 before the first op to one after stream
  // 0 has joined every side stream) when timed, else 0. Tensors with keep[id] set survive
  // their last use (for reading back).
  double run_once(std::vector<std::vector<double>>* op_seconds = nullptr, const std::vector<char>* keep = nullptr);
  // After a timed run_once: each op's start and end, seconds from the step's start (its first
  // and second event against the step's start event).
  void op_offsets(std::vector<double>& starts, std::vector<double>& ends) const;
  // One eager pass without per-op events: its GPU time as above (the step as it runs, no probes).
  // host_seconds (optional): appends one sample per op, the host time spent issuing it
  // (allocation, stream waits, the launch, frees), for the eager dispatch figures.
  double run_walled(std::vector<std::vector<double>>* host_seconds = nullptr);
  // One eager pass with stream 0 held (stream_hold.hpp) until every op is issued, so the ops
  // run back to back without waiting for the host: op_seconds and the returned GPU time as
  // run_once (without op_seconds, no per-op events: the held step as it runs). nullopt, and
  // nothing appended, when the hold gave up before the host had issued the step.
  std::optional<double> run_held(std::vector<std::vector<double>>* op_seconds = nullptr);
  // Records one pass into a CUDA graph (run one eager pass first: it uploads the fused
  // AdamW descriptors and warms the allocator's cache).
  void capture(const std::vector<char>* keep = nullptr);
  // Launches the captured graph `times` times; each launch's time by events.
  std::vector<double> replay(int times);
  // Whether replay_traced() can time the captured graph op by op (CUPTI asked for, at hand).
  [[nodiscard]] bool traces_ops() const { return m_trace != nullptr && !m_node_op.empty(); }
  // Launches the captured graph once with CUPTI recording it, and appends op i's time to
  // op_seconds[i] (backends/common/op_spans.hpp: from the end of the previous op of its stream to the
  // end of its last kernel, copy or memset). Returns false, appending nothing, when a node of
  // an op went unrecorded.
  bool replay_traced(std::vector<std::vector<double>>& op_seconds);
  // Records the timed variant of the step (after capture(): same walk, plus the per-op
  // events as event-record nodes, cudaEventRecordExternal). Returns "" on success, else why
  // the driver refused it (the runner is left as before, without a timed variant).
  [[nodiscard]] std::string capture_timed();
  [[nodiscard]] bool has_timed_graph() const { return m_timed_exec != nullptr; }
  // The captured step (timed: the variant with event nodes); nullptr before its capture.
  [[nodiscard]] cudaGraph_t captured(bool timed) const { return timed ? m_timed_graph : m_cuda_graph; }
  // Launches the timed variant `times` times; each launch's time by events around it (as
  // replay()), and, when op_seconds is given, op i's time between its two event nodes
  // appended to (*op_seconds)[i].
  std::vector<double> replay_timed(int times, std::vector<std::vector<double>>* op_seconds = nullptr);
  // Fills the persistent tensors again with their initial values (and poisons the host
  // tensors that ops write, so a later pass that does not write them shows).
  void reset_persistent();

  // Overwrites persistent int32 tensor `id` with `values` (as many as it holds), in stream
  // order before the next pass.
  void write(int id, const std::vector<int32_t>& values);
  // Values of a live tensor widened to float (ids exact, e4m3 dequantized). Synchronizes.
  // Host tensors are read from host memory.
  [[nodiscard]] std::vector<float> read(int id) const;
  [[nodiscard]] const CachingAllocator& allocator() const { return m_alloc; }
  // Ops whose kernels carved less workspace than core/cost/workspace.hpp planned (see OpExecutor).
  [[nodiscard]] const std::vector<std::string>& workspace_mismatches() const { return m_exec->workspace_mismatches(); }

 private:
  void walk(bool timed, bool capturing, const std::vector<char>* keep,
            std::vector<std::vector<double>>* host_seconds = nullptr);
  // Ends a capture that failed part-way and returns what its walk still held.
  void abandon_capture();
  void record_op_event(cudaEvent_t e, cudaStream_t s, bool capturing);
  // During capture: the nodes op i added to the capture of stream s, into m_node_op.
  void note_captured_nodes(cudaStream_t s, int op);
  void append_op_times(std::vector<std::vector<double>>& op_seconds) const;
  // Launches exec `times` times, each between two events on stream 0; after each launch
  // `after_launch` runs (the stream synchronized).
  template <class F>
  std::vector<double> launch(cudaGraphExec_t exec, int times, F&& after_launch);
  void fill_persistent_tensors();
  void release_all();

  void create_streams();
  void wait(cudaStream_t s, cudaEvent_t e);
  void sync_all();

  const Graph& m_graph;
  NcclRanks* m_ranks = nullptr;
  uint64_t m_seed;
  CachingAllocator& m_alloc;
  cudaStream_t m_stream;                  // stream 0 (the backend's)
  StreamPlan m_plan;
  std::vector<cudaStream_t> m_streams;    // by lane; [0] = m_stream, the others created here
  std::unique_ptr<OpExecutor> m_exec;
  HostMemory m_host;                      // host tensors' memory
  std::vector<void*> m_buffers;           // by tensor id; nullptr when not live
  std::vector<float*> m_scales;           // by tensor id: dequantization scale of e4m3 tensors
  float* m_scale_slots = nullptr;         // [fp8 tensors × 64] device floats behind m_scales (workspace)
  bool m_counts_gemm_workspace = false;   // the GEMM engine's workspace is counted in m_alloc
  std::vector<std::vector<int>> m_frees;  // by op index: activations released after it
  std::vector<char> m_borrowed;           // by tensor id: held by SharedTensors, not released here
  std::vector<char> m_int8_gemm_weights;  // by tensor id: a W8A8 weight, its values stored [N, K]
  std::vector<char> m_filled;             // by tensor id: persistent and not to be filled (shared, as found; or KV pages)
  bool m_op_events = true;
  std::vector<cudaEvent_t> m_events;      // [2 * ops]: start, end of each op (on its stream)
  std::vector<cudaEvent_t> m_fork;        // by op: recorded on stream 0 before a side-stream op
  std::vector<cudaEvent_t> m_done;        // by op: recorded on its side stream after it
  cudaEvent_t m_step_start = nullptr, m_step_end = nullptr;  // on stream 0
  cudaGraph_t m_cuda_graph = nullptr;
  cudaGraphExec_t m_graph_exec = nullptr;
  cudaGraph_t m_timed_graph = nullptr;    // capture_timed(): the step with per-op event nodes
  cudaGraphExec_t m_timed_exec = nullptr;
  std::unique_ptr<StreamHold> m_hold;     // run_held(), made on first use
  KernelTrace* m_trace = nullptr;         // the process's CUPTI trace, when asked for and at hand
  std::unordered_map<uint64_t, int> m_node_op;  // captured node id -> index of the op that made it
  std::vector<int> m_op_nodes;            // by op: nodes it made in the capture
  std::vector<char> m_waits_elsewhere;    // by op: its start waits on another stream
  std::vector<char> m_bucket;             // by op: a DDP bucket's all-reduce (NcclRanks::is_bucket)
};

}  // namespace perfsim::cuda
