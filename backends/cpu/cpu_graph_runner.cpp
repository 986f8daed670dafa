// GraphRunner: the allocation schedule and op loop shared by timed runs and evaluation.
#include "backends/cpu/cpu_graph_runner.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "backends/common/quantized_weights.hpp"
#include "backends/cpu/cpu_collectives.hpp"
#include "backends/cpu/host_names.hpp"
#include "backends/cpu/cpu_vocab_parallel.hpp"
#include "backends/cpu/cpu_kernel_table.hpp"
#include "backends/cpu/cpu_op_exec.hpp"
#include "backends/ops/op_shapes.hpp"
#include "backends/ops/vocab_shard.hpp"
#include "core/cost/memory_model.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

std::size_t bytes_of_tensor(const Tensor& t) {
  if (const host::QuantLayout q = host::quant_layout(t); q.k > 0) return q.bytes();
  return static_cast<std::size_t>(t.elements()) * static_cast<std::size_t>(bytes_of(storage_of(t.dtype)));
}

}  // namespace

GraphRunner::GraphRunner(const Graph& g, uint64_t seed, Communicator* ranks, SharedTensors* shared)
    : m_graph(g), m_ranks(ranks) {
  g.check();
  for (const Tensor& t : g.tensors) {
    const Storage s = storage_of(t.dtype);
    // int8 and int4 only as a quantized weight (its GEMM dequantizes it: backends/common/quantized_weights.hpp),
    // on one rank (a shard would take values of its own, not its whole's).
    if (host::quant_layout(t).k > 0) {
      if (!t.shard.empty())
        throw NotExecutable(fmt::format("cpu backend runs quantized weights on one rank: '{}' is a shard", t.name));
      continue;
    }
    // fp8 only as a KV cache: no CPU kernel reads fp8 weights or activations.
    if (s == Storage::unsupported || (s == Storage::f8e4m3 && !is_fp8_kv_cache(t)))
      throw NotExecutable(fmt::format("cpu backend cannot hold {} tensor '{}'", name_of(t.dtype), t.name));
  }
  for (const Op& op : g.ops) ops::check_op(op, g);

  const std::vector<int> last = last_use(g);
  m_frees.resize(g.ops.size());
  for (const Tensor& t : g.tensors) {
    const int l = last.at(static_cast<std::size_t>(t.id));
    if (!is_persistent(t) && l >= 0) m_frees[static_cast<std::size_t>(l)].push_back(t.id);
  }
  m_buffers.assign(g.tensors.size(), nullptr);
  std::vector<void*> to_fill(g.tensors.size(), nullptr);
  for (const Tensor& t : g.tensors) {
    void*& p = m_buffers[static_cast<std::size_t>(t.id)];
    if (t.on_host()) {
      // Host memory is not the device's: allocated apart, so it stays out of the peak.
      m_host.push_back(std::make_unique<std::byte[]>(bytes_of_tensor(t)));
      p = m_host.back().get();
    } else if (shared != nullptr && is_persistent(t) && SharedTensors::shares(t)) {
      p = shared->find(t);
      if (p != nullptr) continue;                            // as earlier graphs left it
      p = shared->add(t, bytes_of_tensor(t));
      if (t.role == TensorRole::kv_cache) continue;          // starts empty (zeros)
    } else if (is_persistent(t)) {
      p = m_alloc.allocate(bytes_of_tensor(t), t.role);
    }
    to_fill[static_cast<std::size_t>(t.id)] = p;
  }
  fill_persistent(g, to_fill, seed, ranks != nullptr ? ranks->rank() : 0);
}

void GraphRunner::write(int id, const std::vector<int32_t>& values) {
  const Tensor& t = m_graph.tensor(id);
  void* p = m_buffers.at(static_cast<std::size_t>(id));
  if (t.dtype != DType::int32 || p == nullptr || !is_persistent(t) || t.elements() != static_cast<int64_t>(values.size()))
    throw std::logic_error(fmt::format("cpu backend: cannot write {} int32 values into '{}'", values.size(), t.name));
  std::memcpy(p, values.data(), values.size() * sizeof(int32_t));
}

void GraphRunner::run_once(std::vector<std::vector<double>>* op_seconds, const std::vector<char>* keep,
                           std::vector<double>* starts, std::vector<double>* ends) {
  using clock = std::chrono::steady_clock;
  const Graph& g = m_graph;
  const auto begin = clock::now();
  auto since = [&](clock::time_point t) { return std::chrono::duration<double>(t - begin).count(); };
  // Program order for every stream: one queue executes them all (Op::stream only changes
  // how the timeline overlaps their measured times).
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    for (int id : op.outputs) {
      void*& p = m_buffers[static_cast<std::size_t>(id)];
      if (p == nullptr) p = m_alloc.allocate(bytes_of_tensor(g.tensor(id)), g.tensor(id).role);
    }
    const auto t0 = clock::now();
    try {
      if (op.kind == OpKind::collective && m_ranks != nullptr)
        execute_collective(op, g, m_buffers, *m_ranks);
      else if (m_ranks != nullptr && ops::on_vocab_shard(op, g))
        execute_on_vocab_shard(op, g, m_buffers, *m_ranks);
      else
        execute_op(op, g, m_buffers, m_alloc, m_ranks != nullptr ? m_ranks->rank() : 0);
    } catch (const NotExecutable&) {
      throw;
    } catch (const std::exception& e) {
      // Kernel checks (token ids out of range, a cache row past its capacity) name the op.
      throw NotExecutable(fmt::format("cpu backend: op '{}' ({}) failed: {}", op.name, name_of(op.kind), e.what()));
    }
    const auto t1 = clock::now();
    if (op_seconds != nullptr) (*op_seconds)[i].push_back(std::chrono::duration<double>(t1 - t0).count());
    if (starts != nullptr) starts->push_back(since(t0));
    if (ends != nullptr) ends->push_back(since(t1));
    for (int id : m_frees[i]) {
      if (keep != nullptr && (*keep)[static_cast<std::size_t>(id)]) continue;
      m_alloc.release(m_buffers[static_cast<std::size_t>(id)]);
      m_buffers[static_cast<std::size_t>(id)] = nullptr;
    }
  }
  // Tensors a side stream read last are kept until the end of the step (last_use -1), as the
  // memory model keeps them: released here, so the next pass starts from the persistent ones.
  for (const Tensor& t : g.tensors) {
    void*& p = m_buffers[static_cast<std::size_t>(t.id)];
    if (p == nullptr || is_persistent(t) || t.on_host()) continue;
    if (keep != nullptr && (*keep)[static_cast<std::size_t>(t.id)]) continue;
    m_alloc.release(p);
    p = nullptr;
  }
}

std::vector<float> GraphRunner::read(int id) const {
  const Tensor& t = m_graph.tensor(id);
  const void* p = m_buffers.at(static_cast<std::size_t>(id));
  if (p == nullptr) throw std::logic_error(fmt::format("cpu backend: tensor '{}' is not live", t.name));
  std::vector<float> out(static_cast<std::size_t>(t.elements()));
  const Storage s = storage_of(t.dtype);
  if (const host::QuantLayout q = host::quant_layout(t); q.k > 0) {
    host::dequantize(p, q, out.data());  // the weight it stands for
  } else if (s == Storage::i32) {
    const auto* ids = static_cast<const int32_t*>(p);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(ids[i]);
  } else {
    convert(p, s, out.data(), Storage::f32, t.elements());
    if (s == Storage::f8e4m3) {
      const float scale = kv_scale_of(m_graph, id);
      for (float& x : out) x *= scale;
    }
  }
  return out;
}

}  // namespace perfsim::cpu
