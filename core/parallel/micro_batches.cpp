// unroll_micro_batches: a pipeline stage's step with each micro-batch's passes copied out in
// schedule order (micro_batches.hpp).
#include "core/parallel/micro_batches.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/graph/rewrite.hpp"
#include "core/parallel/pipeline_schedule.hpp"

namespace perfsim {

namespace {

// Tensors each micro-batch has its own of: what the forward and backward passes compute from
// the micro-batch's tokens, and the tokens themselves.
bool per_micro_batch(const Tensor& t) { return t.role == TensorRole::activation || t.role == TensorRole::input; }

// Ops each micro-batch runs: its forward and backward passes, their tensor-parallel collectives
// and pipeline transfers. A collective on a gradient or weight (data-parallel buckets, ZeRO)
// runs once for the step's accumulated gradients.
bool runs_per_micro_batch(const Op& op, const Graph& g) {
  if (op.stage != Stage::forward && op.stage != Stage::backward) return false;
  if (op.kind != OpKind::collective) return true;
  auto on_micro_data = [&](const std::vector<int>& ids) {
    return std::all_of(ids.begin(), ids.end(), [&](int id) { return per_micro_batch(g.tensor(id)); });
  };
  return on_micro_data(op.inputs) && on_micro_data(op.outputs);
}

std::string data_name(const Tensor& t) {
  constexpr std::string_view host = ".host";
  std::string n = t.name;
  if (t.on_host() && n.size() > host.size() && n.compare(n.size() - host.size(), host.size(), host) == 0)
    n.resize(n.size() - host.size());
  return n;
}

class Unroller {
 public:
  Unroller(const Graph& stage, int micro_batches) : m_stage(stage), m_m(micro_batches) {
    m_out.graph = stage;
    m_out.graph.ops.clear();
    m_out.micro_batches = micro_batches;
    m_copies.assign(stage.tensors.size(), std::vector<int>(static_cast<std::size_t>(micro_batches), -1));
    for (const Op& op : stage.ops) m_per_micro.push_back(runs_per_micro_batch(op, stage));
    const auto first_backward =
        std::find_if(stage.ops.begin(), stage.ops.end(), [](const Op& op) { return op.stage == Stage::backward; });
    m_backward_begin = static_cast<std::size_t>(first_backward - stage.ops.begin());
    int chunk = 0;
    for (std::size_t i = 0; i < stage.ops.size(); ++i) {
      if (m_per_micro[i]) chunk = stage.ops[i].chunk;
      m_anchor_chunk.push_back(chunk);
    }
  }

  MicroBatchGraph run(const std::vector<PipelineSlot>& order) {
    // What runs once per step before the first backward (nothing in the layouts that execute)
    // goes first.
    for (std::size_t i = 0; i < m_backward_begin; ++i)
      if (!m_per_micro[i]) emit_once(i);
    // A slot runs its pass's ops of its chunk, in the stage graph's order. What runs once per
    // step after the first backward (gradient buckets, the optimizer) runs in the last
    // micro-batch's backward of the chunk of the op before it: once that chunk's gradients are
    // whole (an interleaved stage's backward walks its chunks from the last to the first).
    for (const PipelineSlot& slot : order) {
      const Stage pass = slot.kind == PassKind::forward ? Stage::forward : Stage::backward;
      const bool last = pass == Stage::backward && slot.micro_batch == m_m - 1;
      for (std::size_t i = 0; i < m_stage.ops.size(); ++i) {
        const Op& op = m_stage.ops[i];
        if (m_per_micro[i]) {
          if (op.stage == pass && op.chunk == slot.chunk) emit_copy(i, slot.micro_batch);
        } else if (last && i >= m_backward_begin && m_anchor_chunk[i] == slot.chunk) {
          emit_once(i);
        }
      }
    }
    remove_unused_tensors(m_out.graph);  // the stage graph's own activations, now copied
    m_out.graph.check();
    return std::move(m_out);
  }

 private:
  void emit_once(std::size_t i) {
    const Op& op = m_stage.ops[i];
    for (const auto* ids : {&op.inputs, &op.outputs})
      for (int id : *ids)
        if (per_micro_batch(m_stage.tensor(id)))
          throw std::logic_error(fmt::format("'{}' runs once per step but touches '{}', which every micro-batch has",
                                             op.name, m_stage.tensor(id).name));
    m_out.graph.add_op(op);
    m_out.origin.push_back(static_cast<int>(i));
  }

  void emit_copy(std::size_t i, int micro) {
    Op op = m_stage.ops[i];
    op.name = micro_batch_name(op.name, micro);
    op.count /= m_m;  // the stage graph's count stands for every micro-batch
    for (int& id : op.inputs) id = copy_of(id, micro);
    for (int& id : op.outputs) id = copy_of(id, micro);
    if (op.kind == OpKind::cross_entropy) {
      const int64_t rows = op.attrs.loss_rows > 0 ? op.attrs.loss_rows : op.attrs.rows;
      op.attrs.loss_rows = rows * m_m;  // one mean over the step's tokens
    }
    m_out.graph.add_op(std::move(op));
    m_out.origin.push_back(static_cast<int>(i));
  }

  int copy_of(int id, int micro) {
    const Tensor& t = m_stage.tensor(id);
    if (!per_micro_batch(t)) return id;
    int& copy = m_copies[static_cast<std::size_t>(id)][static_cast<std::size_t>(micro)];
    if (copy >= 0) return copy;
    Tensor c = t;
    c.name = micro_batch_name(t.name, micro);
    if (t.role == TensorRole::input) {
      // Micro-batch `micro` of the rank's part of the batch (the data-parallel part, or the
      // whole batch): its whole holds every micro-batch.
      if (c.shard.empty()) c.shard = {Shard{data_name(t), t.shape, 0, 1, 1}};
      Shard& s = c.shard.front();
      s.whole.at(0) *= m_m;
      s.micro = micro;
      s.micros = m_m;
    }
    copy = m_out.graph.add_tensor(std::move(c));
    return copy;
  }

  const Graph& m_stage;
  int m_m;
  MicroBatchGraph m_out;
  std::vector<std::vector<int>> m_copies;  // [tensor][micro-batch]: the copy's id, −1 before it is made
  std::vector<bool> m_per_micro;
  std::vector<int> m_anchor_chunk;  // per op: the chunk of the last op each micro-batch runs up to it
  std::size_t m_backward_begin = 0;
};

}  // namespace

std::string micro_batch_name(const std::string& name, int micro) { return fmt::format("mb{}/{}", micro, name); }

int micro_batch_of(const std::string& name, std::string* base) {
  const std::size_t slash = name.find('/');
  if (name.size() < 4 || name.compare(0, 2, "mb") != 0 || slash == std::string::npos || slash < 3) return -1;
  int micro = 0;
  for (std::size_t i = 2; i < slash; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    micro = micro * 10 + (name[i] - '0');
  }
  if (base != nullptr) *base = name.substr(slash + 1);
  return micro;
}

std::string micro_batch_unsupported_reason(const Graph& stage, const ParallelSpec& p) {
  (void)stage;
  if (p.sharding_stage() >= 2)
    return "predicted only: a pipeline of several micro-batches executes with DDP or ZeRO-1 (ZeRO-2/3 and FSDP "
           "reduce or gather every micro-batch)";
  return {};
}

MicroBatchGraph unroll_micro_batches(const Graph& stage, const ParallelSpec& p, int stage_index) {
  if (const std::string why = micro_batch_unsupported_reason(stage, p); !why.empty()) throw ConfigError(why);
  const int m = static_cast<int>(std::max<int64_t>(1, stage.workload.grad_accum));
  int chunks = 1;
  for (const Op& op : stage.ops) chunks = std::max(chunks, op.chunk + 1);
  if (chunks != p.interleave)
    throw std::logic_error(fmt::format("stage graph of {} model chunks for a layout of interleave {}", chunks,
                                       p.interleave));
  Unroller u(stage, m);
  return u.run(pipeline_order(p.pipeline_schedule(), p.pp, m, chunks, stage_index));
}

}  // namespace perfsim
