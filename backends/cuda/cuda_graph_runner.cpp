// GraphRunner (see cuda_graph_runner.hpp): persistent state, host tensors, the allocation
// walk with its stream forks and joins shared by eager passes and graph capture (plain and
// with per-op event nodes), event timing of passes and replays, and read-back.
#include "backends/cuda/cuda_graph_runner.hpp"

#include <chrono>

#include <cuda_fp8.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/common/tensor_init.hpp"
#include "backends/ops/op_shapes.hpp"
#include "backends/common/parallel.hpp"
#include "backends/common/scalar.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/cuda_quantized_gemm.hpp"
#include "backends/common/quantized_weights.hpp"
#include "backends/cuda/cuda_vocab_parallel.hpp"
#include "backends/cuda/stream_wait.hpp"
#include "backends/common/op_spans.hpp"
#include "core/cost/memory_model.hpp"
#include "core/cost/workspace.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

namespace {

std::size_t bytes_of_tensor(const Tensor& t) {
  if (const host::QuantLayout q = host::quant_layout(t); q.k > 0) return q.bytes();
  return static_cast<std::size_t>(t.elements()) * static_cast<std::size_t>(bytes_of(elem_of(t.dtype)));
}

bool is_fp8_kv_cache(const Tensor& t) { return t.role == TensorRole::kv_cache && elem_of(t.dtype) == Elem::e4m3; }

// The scale an fp8 KV cache is stored with: OpAttrs::kv_scale of the ops on it (the fp8_kv pass
// gives them all the same), 1 when none says.
float kv_cache_scale(const Graph& g, int id) {
  for (const Op& op : g.ops)
    for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
      for (int x : *ids)
        if (x == id && op.attrs.kv_scale > 0) return static_cast<float>(op.attrs.kv_scale);
  return 1.0f;
}

}  // namespace

GraphRunner::GraphRunner(const Graph& g, uint64_t seed, CachingAllocator& alloc, GemmEngine& gemm, cudaStream_t stream,
                         NcclRanks* ranks, SharedTensors* shared, bool op_events)
    : m_graph(g), m_ranks(ranks), m_seed(seed), m_alloc(alloc), m_stream(stream),
      m_op_events(op_events), m_trace(KernelTrace::requested() ? KernelTrace::get() : nullptr) {
  g.check();
  for (const Tensor& t : g.tensors) {
    // int8 and int4 only as a quantized weight, which its GEMMs read (cuda_quantized_gemm.hpp).
    if (host::quant_layout(t).k > 0) {
      if (t.on_host()) throw NotExecutable(fmt::format("cuda backend keeps no quantized weight in host memory ('{}')", t.name));
      continue;
    }
    if (elem_of(t.dtype) == Elem::unsupported)
      throw NotExecutable(fmt::format("cuda backend cannot hold {} tensor '{}'", name_of(t.dtype), t.name));
    if (t.on_host() && elem_of(t.dtype) == Elem::e4m3)
      throw NotExecutable(fmt::format("cuda backend keeps no fp8 tensor in host memory ('{}')", t.name));
  }
  m_bucket.assign(g.ops.size(), 0);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (const std::string why = m_ranks != nullptr ? rank_op_unsupported_reason(op, g) : op_unsupported_reason(op, g);
        !why.empty())
      throw NotExecutable(why);
    ops::check_op(op, g);
    if (m_ranks != nullptr) m_bucket[i] = NcclRanks::is_bucket(op, g) ? 1 : 0;
  }
  if (m_ranks != nullptr) m_ranks->prepare(g);
  m_plan = plan_streams(g);
  m_int8_gemm_weights = int8_gemm_weights(g);
  m_exec = std::make_unique<OpExecutor>(g, alloc, gemm, stream, ranks);
  m_waits_elsewhere.assign(g.ops.size(), 0);
  bool joined = false;  // stream 0 has joined a side stream since its last op
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const int lane = m_plan.lane[i];
    m_waits_elsewhere[i] = lane != 0 || !m_plan.waits[i].empty() || joined ? 1 : 0;
    if (lane == 0) joined = false;
    if (!m_plan.after[i].empty()) joined = true;
  }

  m_frees.resize(g.ops.size());
  for (const Tensor& t : g.tensors)
    if (const int l = m_plan.free_after.at(static_cast<std::size_t>(t.id)); l >= 0)
      m_frees[static_cast<std::size_t>(l)].push_back(t.id);
  m_buffers.assign(g.tensors.size(), nullptr);
  m_scales.assign(g.tensors.size(), nullptr);
  std::size_t fp8_count = 0;
  for (const Tensor& t : g.tensors)
    if (elem_of(t.dtype) == Elem::e4m3) ++fp8_count;
  try {
    // The GEMM engine's cuBLASLt workspace is device memory this run holds (persistent
    // workspace in core/cost/workspace.hpp): counted, though the engine allocated it.
    m_alloc.count_external(GemmEngine::workspace_bytes, TensorRole::workspace);
    m_counts_gemm_workspace = true;
    if (fp8_count > 0) {
      // One 256-byte line per scale: cuBLASLt wants aligned scale pointers.
      constexpr std::size_t line = 64;  // floats
      static_assert(line * sizeof(float) == static_cast<std::size_t>(fp8_scale_slot_bytes));
      m_scale_slots = static_cast<float*>(m_alloc.allocate(fp8_count * line * sizeof(float), TensorRole::workspace));
      std::size_t slot = 0;
      for (const Tensor& t : g.tensors)
        if (elem_of(t.dtype) == Elem::e4m3) m_scales[static_cast<std::size_t>(t.id)] = m_scale_slots + line * slot++;
    }
    m_borrowed.assign(g.tensors.size(), 0);
    m_filled.assign(g.tensors.size(), 0);
    for (const Tensor& t : g.tensors) {
      const auto id = static_cast<std::size_t>(t.id);
      void*& p = m_buffers[id];
      if (t.on_host()) {
        p = m_host.allocate(bytes_of_tensor(t), t.residence == Residence::host_pinned);
      } else if (shared != nullptr && is_persistent(t) && SharedTensors::shares(t)) {
        const bool fp8 = elem_of(t.dtype) == Elem::e4m3;
        SharedTensors::Slot slot = shared->find(t);
        m_filled[id] = slot.data != nullptr || t.role == TensorRole::kv_cache ? 1 : 0;  // as found; pages start empty
        if (slot.data == nullptr) slot = shared->add(t, bytes_of_tensor(t), fp8);
        p = slot.data;
        if (fp8) m_scales[id] = slot.scale;
        m_borrowed[id] = 1;
      } else if (is_persistent(t)) {
        p = m_alloc.allocate(bytes_of_tensor(t), t.role);
      }
    }
    // An fp8 KV cache's slot holds its kv_scale (read() decodes with it), also where the cache
    // is an engine's shared pages, which start as zeros and are not filled here.
    for (const Tensor& t : g.tensors)
      if (is_fp8_kv_cache(t) && !t.on_host()) {
        const float scale = kv_cache_scale(g, t.id);
        PERFSIM_CUDA_CHECK(cudaMemcpy(m_scales[static_cast<std::size_t>(t.id)], &scale, sizeof(float),
                                      cudaMemcpyHostToDevice));
      }
    fill_persistent_tensors();
    create_streams();
  } catch (...) {
    release_all();  // a graph that does not fit leaves the allocator as it found it
    throw;
  }
}

GraphRunner::~GraphRunner() { release_all(); }

void GraphRunner::create_streams() {
  m_streams.assign(m_plan.streams.size(), nullptr);
  m_streams[0] = m_stream;
  for (std::size_t l = 1; l < m_streams.size(); ++l)
    PERFSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&m_streams[l], cudaStreamNonBlocking));
  const std::size_t n = m_graph.ops.size();
  m_events.assign(m_op_events ? 2 * n : 0, nullptr);
  for (cudaEvent_t& e : m_events) PERFSIM_CUDA_CHECK(cudaEventCreate(&e));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&m_step_start));
  PERFSIM_CUDA_CHECK(cudaEventCreate(&m_step_end));
  m_fork.assign(n, nullptr);
  m_done.assign(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    if (m_plan.lane[i] == 0) continue;  // only side-stream ops fork and signal completion
    PERFSIM_CUDA_CHECK(cudaEventCreateWithFlags(&m_fork[i], cudaEventDisableTiming));
    PERFSIM_CUDA_CHECK(cudaEventCreateWithFlags(&m_done[i], cudaEventDisableTiming));
  }
}

void GraphRunner::sync_all() {
  // Bounded on ranks (drain_stream): this runs while an error unwinds too.
  for (cudaStream_t s : m_streams)
    if (s != nullptr) (void)drain_stream(s, m_ranks);
  if (m_streams.empty()) (void)drain_stream(m_stream, m_ranks);
}

void GraphRunner::release_all() {
  sync_all();
  if (m_graph_exec != nullptr) (void)cudaGraphExecDestroy(m_graph_exec);
  if (m_cuda_graph != nullptr) (void)cudaGraphDestroy(m_cuda_graph);
  if (m_timed_exec != nullptr) (void)cudaGraphExecDestroy(m_timed_exec);
  if (m_timed_graph != nullptr) (void)cudaGraphDestroy(m_timed_graph);
  for (const auto* list : {&m_events, &m_fork, &m_done})
    for (cudaEvent_t e : *list)
      if (e != nullptr) (void)cudaEventDestroy(e);
  for (cudaEvent_t e : {m_step_start, m_step_end})
    if (e != nullptr) (void)cudaEventDestroy(e);
  m_exec.reset();
  for (std::size_t id = 0; id < m_buffers.size(); ++id) {
    if (m_graph.tensors[id].on_host()) continue;  // HostMemory frees these
    if (id < m_borrowed.size() && m_borrowed[id] != 0) continue;  // SharedTensors holds these
    try {
      m_alloc.release(m_buffers[id]);
    } catch (...) {
    }
  }
  m_buffers.clear();
  m_host.release_all();
  for (std::size_t l = 1; l < m_streams.size(); ++l)
    if (m_streams[l] != nullptr) (void)cudaStreamDestroy(m_streams[l]);
  m_streams.clear();
  if (m_scale_slots != nullptr) m_alloc.release(m_scale_slots);
  m_scale_slots = nullptr;
  if (m_counts_gemm_workspace) m_alloc.uncount_external(GemmEngine::workspace_bytes, TensorRole::workspace);
  m_counts_gemm_workspace = false;
  m_graph_exec = nullptr;
  m_cuda_graph = nullptr;
  m_timed_exec = nullptr;
  m_timed_graph = nullptr;
  m_events.clear(), m_fork.clear(), m_done.clear();
  m_step_start = m_step_end = nullptr;
}

// Host-side values, one tensor at a time (a large model's state need not fit in host memory
// twice): float and id tensors exactly as the CPU backend fills them; e4m3 tensors from the
// fp32 values the same tensor would hold, quantized with a per-tensor scale amax / 448, and
// stored transposed when fp8_storage says so (quantized once here, not per GEMM); an fp8 KV
// cache with its ops' kv_scale instead, as its appends store rows: e4m3(x / kv_scale).
void GraphRunner::fill_persistent_tensors() {
  const Graph& g = m_graph;
  Graph as_fp32;  // e4m3 tensors re-typed fp32: their values come from the same generator
  bool have_fp8 = false;
  for (const Tensor& t : g.tensors) have_fp8 = have_fp8 || elem_of(t.dtype) == Elem::e4m3;
  if (have_fp8) {
    as_fp32 = g;
    for (Tensor& t : as_fp32.tensors)
      if (t.dtype == DType::fp8) t.dtype = DType::fp32;
  }
  std::vector<void*> host_ptrs(g.tensors.size(), nullptr);
  std::vector<unsigned char> host;
  for (const Tensor& t : g.tensors) {
    const auto id = static_cast<std::size_t>(t.id);
    if (t.on_host() && t.elements() > 0) {  // filled in place; written ones start as NaN bytes
      if (!is_persistent(t)) {
        std::memset(m_buffers[id], 0xFF, bytes_of_tensor(t));
        continue;
      }
      host_ptrs[id] = m_buffers[id];
      host::fill_persistent(g, host_ptrs, m_seed, m_ranks != nullptr ? m_ranks->rank() : 0);
      host_ptrs[id] = nullptr;
      continue;
    }
    if (!is_persistent(t) || t.elements() == 0) continue;
    if (id < m_filled.size() && m_filled[id] != 0) continue;
    const bool fp8 = elem_of(t.dtype) == Elem::e4m3;
    host.assign(fp8 ? static_cast<std::size_t>(t.elements()) * sizeof(float) : bytes_of_tensor(t), 0);
    host_ptrs[id] = host.data();
    host::fill_persistent(fp8 ? as_fp32 : g, host_ptrs, m_seed, m_ranks != nullptr ? m_ranks->rank() : 0);
    host_ptrs[id] = nullptr;
    if (fp8) {
      const auto* x = reinterpret_cast<const float*>(host.data());
      const auto n = static_cast<std::size_t>(t.elements());
      // The host's e4m3 conversion is a software one: the passes run on every thread (the
      // calibration's fp8 grid quantizes gigabytes of weights). Each chunk owns its outputs.
      constexpr int64_t grain = 1 << 16;
      const bool kv = is_fp8_kv_cache(t);  // a fixed scale: no amax
      const auto chunks = static_cast<std::size_t>((static_cast<int64_t>(n) + grain - 1) / grain);
      std::vector<float> chunk_amax(kv ? 0 : chunks, 0.0f);
      host::parallel_for(static_cast<int64_t>(chunk_amax.size()), 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          float m = 0;
          for (auto i = static_cast<std::size_t>(c * grain); i < std::min(n, static_cast<std::size_t>((c + 1) * grain)); ++i)
            m = std::max(m, std::abs(x[i]));
          chunk_amax[static_cast<std::size_t>(c)] = m;
        }
      });
      const float amax = chunk_amax.empty() ? 0.0f : *std::max_element(chunk_amax.begin(), chunk_amax.end());
      const float scale = kv ? kv_cache_scale(g, t.id) : amax > 0 ? amax / e4m3_max : 1.0f;
      std::vector<unsigned char> q(n);
      const float inv = 1.0f / scale;  // as the device quantizer (cuda_convert.cu) does
      const Fp8Storage& st = m_exec->fp8_layouts()[id];
      if (st.transposed) {  // [batch][k, n] -> [batch][n, k], the fp8 GEMM's TN form; by output row
        host::parallel_for(st.batch * st.n, 64, [&](int64_t r0, int64_t r1) {
          for (int64_t row = r0; row < r1; ++row) {
            const int64_t bt = row / st.n, c = row % st.n;
            for (int64_t r = 0; r < st.k; ++r)
              q[static_cast<std::size_t>(row * st.k + r)] =
                  __nv_fp8_e4m3(x[static_cast<std::size_t>((bt * st.k + r) * st.n + c)] * inv).__x;
          }
        });
      } else if (kv) {  // as the appends store rows (memory_ops.cu)
        host::parallel_for(static_cast<int64_t>(n), grain, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i)
            q[static_cast<std::size_t>(i)] = __nv_fp8_e4m3(x[static_cast<std::size_t>(i)] / scale).__x;
        });
      } else {
        host::parallel_for(static_cast<int64_t>(n), grain, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i)
            q[static_cast<std::size_t>(i)] = __nv_fp8_e4m3(x[static_cast<std::size_t>(i)] * inv).__x;
        });
      }
      PERFSIM_CUDA_CHECK(cudaMemcpy(m_buffers[id], q.data(), n, cudaMemcpyHostToDevice));
      PERFSIM_CUDA_CHECK(cudaMemcpy(m_scales[id], &scale, sizeof(float), cudaMemcpyHostToDevice));
    } else if (m_int8_gemm_weights[id] != 0) {  // W8A8: values stored [N, K]
      std::vector<unsigned char> nk(host.size());
      transpose_quantized_values(t, host.data(), nk.data(), true);
      PERFSIM_CUDA_CHECK(cudaMemcpy(m_buffers[id], nk.data(), nk.size(), cudaMemcpyHostToDevice));
    } else {
      PERFSIM_CUDA_CHECK(cudaMemcpy(m_buffers[id], host.data(), host.size(), cudaMemcpyHostToDevice));
    }
  }
}

void GraphRunner::write(int id, const std::vector<int32_t>& values) {
  const Tensor& t = m_graph.tensor(id);
  void* p = m_buffers.at(static_cast<std::size_t>(id));
  if (t.dtype != DType::int32 || p == nullptr || t.on_host() || !is_persistent(t) ||
      t.elements() != static_cast<int64_t>(values.size()))
    throw std::logic_error(fmt::format("cuda backend: cannot write {} int32 values into '{}'", values.size(), t.name));
  // From pageable memory: staged before the call returns, so `values` may go at once.
  PERFSIM_CUDA_CHECK(cudaMemcpyAsync(p, values.data(), values.size() * sizeof(int32_t), cudaMemcpyHostToDevice, m_stream));
}

void GraphRunner::reset_persistent() {
  wait_stream(m_stream, m_ranks);  // side streams are joined into it
  fill_persistent_tensors();
}

void GraphRunner::wait(cudaStream_t s, cudaEvent_t e) { PERFSIM_CUDA_CHECK(cudaStreamWaitEvent(s, e, 0)); }

// While capturing, a plain cudaEventRecord only marks a point of the capture (what fork and
// join events need); an external record becomes an event-record node that records the event
// each time the graph is launched, so replays can be timed op by op.
void GraphRunner::record_op_event(cudaEvent_t e, cudaStream_t s, bool capturing) {
  if (capturing) PERFSIM_CUDA_CHECK(cudaEventRecordWithFlags(e, s, cudaEventRecordExternal));
  else PERFSIM_CUDA_CHECK(cudaEventRecord(e, s));
}

void GraphRunner::append_op_times(std::vector<std::vector<double>>& op_seconds) const {
  for (std::size_t i = 0; i < m_graph.ops.size(); ++i) {
    float ms = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, m_events[2 * i], m_events[2 * i + 1]));
    op_seconds[i].push_back(ms * 1e-3);
  }
}

void GraphRunner::op_offsets(std::vector<double>& starts, std::vector<double>& ends) const {
  starts.clear();
  ends.clear();
  for (std::size_t i = 0; i < m_graph.ops.size(); ++i) {
    float a = 0, b = 0;
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&a, m_step_start, m_events[2 * i]));
    PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&b, m_step_start, m_events[2 * i + 1]));
    starts.push_back(a * 1e-3);
    ends.push_back(b * 1e-3);
  }
}

void GraphRunner::walk(bool timed, bool capturing, const std::vector<char>* keep,
                       std::vector<std::vector<double>>* host_seconds) {
  const Graph& g = m_graph;
  if (timed && !m_op_events) throw std::logic_error("cuda backend: a runner made without op events cannot time ops");
  auto kept = [&](int id) { return keep != nullptr && (*keep)[static_cast<std::size_t>(id)]; };
  // A timed capture times its replays from outside (replay_timed), so only the ops' events
  // become nodes.
  const bool step_events = timed && !capturing;
  if (step_events) PERFSIM_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
  if (host_seconds != nullptr) host_seconds->resize(g.ops.size());
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const auto issue_start = std::chrono::steady_clock::now();
    const Op& op = g.ops[i];
    const int lane = m_plan.lane[i];
    const cudaStream_t st = m_streams[static_cast<std::size_t>(lane)];
    for (int id : op.outputs) {
      void*& p = m_buffers[static_cast<std::size_t>(id)];
      if (p == nullptr) p = m_alloc.allocate(bytes_of_tensor(g.tensor(id)), g.tensor(id).role);
    }
    if (lane != 0) {  // the fork: after everything issued so far on stream 0
      PERFSIM_CUDA_CHECK(cudaEventRecord(m_fork[i], m_stream));
      wait(st, m_fork[i]);
    }
    for (int w : m_plan.waits[i]) wait(st, m_done[static_cast<std::size_t>(w)]);  // the joins
    nvtxRangePushA(op.name.c_str());
    // Timing events after the waits: an op's time excludes waiting for other streams.
    if (timed) record_op_event(m_events[2 * i], st, capturing);
    try {
      if (op.kind == OpKind::collective && m_ranks != nullptr)
        m_ranks->run(op, g, m_buffers, st, m_alloc, m_bucket[i] != 0);
      else
        m_exec->run(op, m_buffers, m_scales, capturing, st, lane != 0);
    } catch (const NotExecutable&) {
      nvtxRangePop();
      throw;
    } catch (const NcclError&) {  // names the op and the group already; the ranks must end
      nvtxRangePop();
      throw;
    } catch (const std::exception& e) {
      nvtxRangePop();
      throw NotExecutable(fmt::format("cuda backend: op '{}' ({}) failed: {}", op.name, name_of(op.kind), e.what()));
    }
    if (timed) record_op_event(m_events[2 * i + 1], st, capturing);
    if (capturing && !timed && m_trace != nullptr) note_captured_nodes(st, static_cast<int>(i));
    if (lane != 0) PERFSIM_CUDA_CHECK(cudaEventRecord(m_done[i], st));
    nvtxRangePop();
    for (int j : m_plan.after[i]) wait(m_stream, m_done[static_cast<std::size_t>(j)]);
    for (int id : m_frees[i]) {
      if (kept(id)) continue;
      m_alloc.release(m_buffers[static_cast<std::size_t>(id)]);
      m_buffers[static_cast<std::size_t>(id)] = nullptr;
    }
    if (host_seconds != nullptr)
      (*host_seconds)[i].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - issue_start).count());
  }
  // The end of the step: stream 0 joins every side stream (this also closes a capture's
  // side branches), then what was kept for the side streams goes back to the allocator.
  for (std::size_t l = 1; l < m_plan.lane_last.size(); ++l)
    if (const int last = m_plan.lane_last[l]; last >= 0) wait(m_stream, m_done[static_cast<std::size_t>(last)]);
  m_exec->release_held_scratch();
  for (const Tensor& t : g.tensors) {
    void*& p = m_buffers[static_cast<std::size_t>(t.id)];
    if (m_plan.end_of_step[static_cast<std::size_t>(t.id)] && p != nullptr && !kept(t.id)) {
      m_alloc.release(p);
      p = nullptr;
    }
  }
  if (step_events) PERFSIM_CUDA_CHECK(cudaEventRecord(m_step_end, m_stream));
}

double GraphRunner::run_once(std::vector<std::vector<double>>* op_seconds, const std::vector<char>* keep) {
  const bool timed = op_seconds != nullptr && !m_graph.ops.empty();
  walk(timed, false, keep);
  wait_stream(m_stream, m_ranks);  // side streams are joined into it
  if (!timed) return 0;
  append_op_times(*op_seconds);
  float total_ms = 0;
  PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&total_ms, m_step_start, m_step_end));
  return total_ms * 1e-3;
}

double GraphRunner::run_walled(std::vector<std::vector<double>>* host_seconds) {
  if (m_graph.ops.empty()) return 0;
  PERFSIM_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
  walk(false, false, nullptr, host_seconds);  // ends with stream 0 joined to every side stream
  PERFSIM_CUDA_CHECK(cudaEventRecord(m_step_end, m_stream));
  wait_stream(m_stream, m_ranks);
  float total_ms = 0;
  PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&total_ms, m_step_start, m_step_end));
  return total_ms * 1e-3;
}

std::optional<double> GraphRunner::run_held(std::vector<std::vector<double>>* op_seconds) {
  if (m_graph.ops.empty()) return 0.0;
  // Long enough for the host to issue any step this runner walks; a hold that times out
  // (the host blocked on a full launch queue) only costs the pass.
  constexpr double hold_timeout_seconds = 0.05;
  if (m_hold == nullptr) m_hold = std::make_unique<StreamHold>();
  const bool timed = op_seconds != nullptr;
  m_hold->hold(m_stream, hold_timeout_seconds);
  try {
    if (!timed) PERFSIM_CUDA_CHECK(cudaEventRecord(m_step_start, m_stream));
    walk(timed, false, nullptr);
    if (!timed) PERFSIM_CUDA_CHECK(cudaEventRecord(m_step_end, m_stream));
  } catch (...) {
    m_hold->release();
    throw;
  }
  m_hold->release();
  wait_stream(m_stream, m_ranks);  // side streams are joined into it
  if (!m_hold->released()) return std::nullopt;
  if (timed) append_op_times(*op_seconds);
  float total_ms = 0;
  PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&total_ms, m_step_start, m_step_end));
  return total_ms * 1e-3;
}

void GraphRunner::capture(const std::vector<char>* keep) {
  if (m_graph_exec != nullptr) return;
  m_node_op.clear();
  m_op_nodes.assign(m_graph.ops.size(), 0);
  wait_stream(m_stream, m_ranks);
  // Relaxed: a cudaMalloc by the caching allocator (a block size not yet cached) is allowed
  // while capturing; the block then belongs to the captured graph's buffers.
  PERFSIM_CUDA_CHECK(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeRelaxed));
  try {
    walk(false, true, keep);
  } catch (...) {
    abandon_capture();
    throw;
  }
  PERFSIM_CUDA_CHECK(cudaStreamEndCapture(m_stream, &m_cuda_graph));
  PERFSIM_CUDA_CHECK(cudaGraphInstantiate(&m_graph_exec, m_cuda_graph, 0));
}

void GraphRunner::note_captured_nodes(cudaStream_t s, int op) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  PERFSIM_CUDA_CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, &graph, nullptr, nullptr, nullptr));
  if (status != cudaStreamCaptureStatusActive || graph == nullptr) return;
  std::size_t count = 0;
  PERFSIM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  PERFSIM_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  try {
    for (std::size_t k = 0; k < count; ++k)
      if (m_node_op.try_emplace(KernelTrace::node_id(nodes[k]), op).second) ++m_op_nodes[static_cast<std::size_t>(op)];
  } catch (const CudaError&) {  // CUPTI could not name a node: this runner times with events
    m_trace = nullptr;
    m_node_op.clear();
  }
}

bool GraphRunner::replay_traced(std::vector<std::vector<double>>& op_seconds) {
  if (!traces_ops()) throw std::logic_error("cuda graph runner: replay_traced() without a traced capture");
  m_trace->begin();
  try {
    (void)launch(m_graph_exec, 1, [] {});
  } catch (...) {
    (void)m_trace->end();
    throw;
  }
  const std::vector<TraceRecord> records = m_trace->end();
  const std::size_t n = m_graph.ops.size();
  std::vector<OpSpan> spans(n);
  for (std::size_t i = 0; i < n; ++i) {
    spans[i].stream = m_plan.lane[i];
    spans[i].waits_elsewhere = m_waits_elsewhere[i] != 0;
  }
  for (const TraceRecord& r : records) {
    const auto it = m_node_op.find(r.node);
    if (r.node == 0 || it == m_node_op.end()) continue;
    OpSpan& s = spans[static_cast<std::size_t>(it->second)];
    s.first = std::min(s.first, r.start_ns);
    s.last = std::max(s.last, r.end_ns);
  }
  for (std::size_t i = 0; i < n; ++i)
    if (m_op_nodes[i] > 0 && spans[i].first == OpSpan::no_work) return false;
  const std::vector<double> seconds = op_times_from_spans(spans);
  for (std::size_t i = 0; i < n; ++i) op_seconds[i].push_back(seconds[i]);
  return true;
}

void GraphRunner::abandon_capture() {
  // Ending the capture on its origin stream also ends it on the side streams that joined it.
  cudaGraph_t broken = nullptr;
  (void)cudaStreamEndCapture(m_stream, &broken);
  if (broken != nullptr) (void)cudaGraphDestroy(broken);
  (void)cudaGetLastError();
  m_exec->release_held_scratch();
  // Activations the interrupted walk allocated and had not released yet: nothing ran on them.
  for (const Tensor& t : m_graph.tensors) {
    void*& p = m_buffers[static_cast<std::size_t>(t.id)];
    if (p == nullptr || t.on_host() || is_persistent(t)) continue;
    m_alloc.release(p);
    p = nullptr;
  }
}

std::string GraphRunner::capture_timed() {
  if (m_timed_exec != nullptr) return "";
  if (m_graph_exec == nullptr) throw std::logic_error("cuda graph runner: capture_timed() before capture()");
  if (m_graph.ops.empty()) return "the graph has no ops";
  wait_stream(m_stream, m_ranks);
  PERFSIM_CUDA_CHECK(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeRelaxed));
  try {
    walk(true, true, nullptr);
  } catch (const CudaError& e) {  // e.g. event-record nodes refused by the driver
    abandon_capture();
    return e.what();
  } catch (...) {
    abandon_capture();
    throw;
  }
  cudaGraph_t graph = nullptr;
  if (const cudaError_t e = cudaStreamEndCapture(m_stream, &graph); e != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return fmt::format("cudaStreamEndCapture failed: {}", cudaGetErrorString(e));
  }
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0); e != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return fmt::format("cudaGraphInstantiate failed: {}", cudaGetErrorString(e));
  }
  m_timed_graph = graph;
  m_timed_exec = exec;
  return "";
}

template <class F>
std::vector<double> GraphRunner::launch(cudaGraphExec_t exec, int times, F&& after_launch) {
  std::vector<double> out;
  cudaEvent_t start = nullptr, stop = nullptr;
  PERFSIM_CUDA_CHECK(cudaEventCreate(&start));
  try {
    PERFSIM_CUDA_CHECK(cudaEventCreate(&stop));
    for (int r = 0; r < times; ++r) {
      PERFSIM_CUDA_CHECK(cudaEventRecord(start, m_stream));
      PERFSIM_CUDA_CHECK(cudaGraphLaunch(exec, m_stream));
      PERFSIM_CUDA_CHECK(cudaEventRecord(stop, m_stream));
      wait_event(stop, m_ranks);  // every side branch joined before it
      float ms = 0;
      PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      out.push_back(ms * 1e-3);
      after_launch();
    }
  } catch (...) {
    (void)cudaEventDestroy(start);
    if (stop != nullptr) (void)cudaEventDestroy(stop);
    throw;
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return out;
}

std::vector<double> GraphRunner::replay(int times) {
  if (m_graph_exec == nullptr) throw std::logic_error("cuda graph runner: replay() before capture()");
  return launch(m_graph_exec, times, [] {});
}

std::vector<double> GraphRunner::replay_timed(int times, std::vector<std::vector<double>>* op_seconds) {
  if (m_timed_exec == nullptr) throw std::logic_error("cuda graph runner: replay_timed() without a timed capture");
  return launch(m_timed_exec, times, [&] {
    if (op_seconds != nullptr) append_op_times(*op_seconds);
  });
}

std::vector<float> GraphRunner::read(int id) const {
  const Tensor& t = m_graph.tensor(id);
  const void* p = m_buffers.at(static_cast<std::size_t>(id));
  if (p == nullptr) throw std::logic_error(fmt::format("cuda backend: tensor '{}' is not live", t.name));
  wait_stream(m_stream, m_ranks);  // side streams are joined into it
  const auto n = static_cast<std::size_t>(t.elements());
  std::vector<unsigned char> host(bytes_of_tensor(t));
  if (t.on_host()) std::memcpy(host.data(), p, host.size());
  else PERFSIM_CUDA_CHECK(cudaMemcpy(host.data(), p, host.size(), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  const Elem e = elem_of(t.dtype);
  if (const host::QuantLayout q = host::quant_layout(t); q.k > 0) {  // the weight it stands for
    if (m_int8_gemm_weights[static_cast<std::size_t>(id)] != 0) {
      std::vector<unsigned char> kn(host.size());
      transpose_quantized_values(t, host.data(), kn.data(), false);
      host.swap(kn);
    }
    host::dequantize(host.data(), q, out.data());
    return out;
  }
  if (e == Elem::i32) {
    for (std::size_t i = 0; i < n; ++i) {
      int32_t v = 0;
      std::memcpy(&v, host.data() + 4 * i, 4);
      out[i] = static_cast<float>(v);
    }
  } else if (e == Elem::e4m3) {
    float scale = 1;
    PERFSIM_CUDA_CHECK(cudaMemcpy(&scale, m_scales[static_cast<std::size_t>(id)], sizeof(float), cudaMemcpyDeviceToHost));
    const Fp8Storage& st = m_exec->fp8_layouts()[static_cast<std::size_t>(id)];
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t from = i;  // the graph's [batch][k, n] element i, stored [batch][n, k] when transposed
      if (st.transposed) {
        const auto per = static_cast<std::size_t>(st.k * st.n), r = (i % per) / static_cast<std::size_t>(st.n),
                   c = i % static_cast<std::size_t>(st.n);
        from = (i / per) * per + c * static_cast<std::size_t>(st.k) + r;
      }
      __nv_fp8_e4m3 q;
      q.__x = host[from];
      out[i] = static_cast<float>(q) * scale;
    }
  } else {
    host::convert(host.data(), storage_of(e), out.data(), host::Storage::f32, t.elements());
  }
  return out;
}

}  // namespace perfsim::cuda
