// The vocab-parallel embedding and cross-entropy on CPU ranks (see cpu_vocab_parallel.hpp).
// They work in fp32 copies of their operands: these ops are small next to the GEMMs.
#include "backends/cpu/cpu_vocab_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/ops/context_parallel.hpp"
#include "backends/ops/op_shapes.hpp"
#include "backends/ops/vocab_shard.hpp"
#include "backends/cpu/host_names.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

std::size_t at(int64_t i) { return static_cast<std::size_t>(i); }

std::vector<float> as_floats(const Graph& g, int id, const std::vector<void*>& buf) {
  const Tensor& t = g.tensor(id);
  std::vector<float> v(at(t.elements()));
  convert(buf[at(id)], storage_of(t.dtype), v.data(), Storage::f32, t.elements());
  return v;
}

void store(const Graph& g, int id, const std::vector<float>& v, const std::vector<void*>& buf) {
  const Tensor& t = g.tensor(id);
  convert(v.data(), Storage::f32, buf[at(id)], storage_of(t.dtype), t.elements());
}

void embedding(const Op& op, const Graph& g, const std::vector<void*>& buf, int place, int rank) {
  const ops::EmbeddingShape e = ops::on_context_rank(ops::embedding_shape(op, g), op, rank);
  const int64_t offset = place * e.vocab, h = e.hidden;
  const auto* ids = static_cast<const int32_t*>(buf[at(op.inputs[0])]);
  const std::vector<float> table = as_floats(g, op.inputs[1], buf);
  const bool positions = op.inputs.size() > 2 && place == 0;
  const std::vector<float> pos = positions ? as_floats(g, op.inputs[2], buf) : std::vector<float>{};
  std::vector<float> x(at(e.tokens * h), 0.0f);
  for (int64_t t = 0; t < e.tokens; ++t) {
    const int64_t local = ids[t] - offset;
    if (local >= 0 && local < e.vocab)
      std::copy_n(table.begin() + local * h, h, x.begin() + t * h);
    if (positions) {
      const int64_t p = e.position_of(t);
      for (int64_t c = 0; c < h; ++c) x[at(t * h + c)] += pos[at(p * h + c)];
    }
  }
  store(g, op.outputs[0], x, buf);
}

void embedding_bwd(const Op& op, const Graph& g, const std::vector<void*>& buf, int place, int rank) {
  const ops::EmbeddingShape e = ops::on_context_rank(ops::embedding_shape(op, g), op, rank);
  const int64_t offset = place * e.vocab, h = e.hidden;
  const auto* ids = static_cast<const int32_t*>(buf[at(op.inputs[0])]);
  const std::vector<float> dx = as_floats(g, op.inputs[1], buf);
  const bool positions = op.outputs.size() > 1;
  std::vector<float> dtable = e.accumulate ? as_floats(g, op.outputs[0], buf)
                                           : std::vector<float>(at(g.tensor(op.outputs[0]).elements()), 0.0f);
  std::vector<float> dpos;
  if (positions)
    dpos = e.accumulate ? as_floats(g, op.outputs[1], buf)
                        : std::vector<float>(at(g.tensor(op.outputs[1]).elements()), 0.0f);
  for (int64_t t = 0; t < e.tokens; ++t) {
    const int64_t local = ids[t] - offset;
    if (local >= 0 && local < e.vocab)
      for (int64_t c = 0; c < h; ++c) dtable[at(local * h + c)] += dx[at(t * h + c)];
    if (positions) {
      const int64_t p = e.position_of(t);
      for (int64_t c = 0; c < h; ++c) dpos[at(p * h + c)] += dx[at(t * h + c)];
    }
  }
  store(g, op.outputs[0], dtable, buf);
  if (positions) store(g, op.outputs[1], dpos, buf);
}

void cross_entropy(const Op& op, const Graph& g, const std::vector<void*>& buf, const Shard& s, Communicator& ranks) {
  const RankGroup group{s.parts, s.stride};
  const int place = group.place(ranks.rank());
  const Tensor& logits_t = g.tensor(op.inputs[0]);
  const int64_t rows = logits_t.shape.front(), cols = logits_t.elements() / rows;
  const int64_t offset = place * cols;
  const std::vector<float> x = as_floats(g, op.inputs[0], buf);
  const auto* targets = static_cast<const int32_t*>(buf[at(op.inputs[1])]);
  // The whole row's maximum: every rank's, gathered.
  std::vector<float> local_max(at(rows), -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) local_max[at(r)] = std::max(local_max[at(r)], x[at(r * cols + c)]);
  std::vector<float> maxima(at(rows * s.parts));
  ranks.all_gather(local_max.data(), maxima.data(), rows * static_cast<int64_t>(sizeof(float)), group);
  std::vector<float> mx(at(rows), -std::numeric_limits<float>::infinity());
  for (int p = 0; p < s.parts; ++p)
    for (int64_t r = 0; r < rows; ++r) mx[at(r)] = std::max(mx[at(r)], maxima[at(p * rows + r)]);
  std::vector<float> sum(at(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) sum[at(r)] += std::exp(x[at(r * cols + c)] - mx[at(r)]);
  ranks.all_reduce_sum(sum.data(), rows, group);
  auto* loss = static_cast<float*>(buf[at(op.outputs[0])]);
  const bool grads = op.outputs.size() > 1;
  std::vector<float> dlogits(grads ? at(rows * cols) : 0);
  const float inv_rows = 1.0f / static_cast<float>(op.attrs.loss_rows > 0 ? op.attrs.loss_rows : rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float lse = mx[at(r)] + std::log(sum[at(r)]);
    const int64_t target = targets[r] - offset;
    const bool mine = target >= 0 && target < cols;
    loss[r] = lse / static_cast<float>(s.parts) - (mine ? x[at(r * cols + target)] : 0.0f);
    if (!grads) continue;
    for (int64_t c = 0; c < cols; ++c)
      dlogits[at(r * cols + c)] = (std::exp(x[at(r * cols + c)] - lse) - (mine && c == target ? 1.0f : 0.0f)) * inv_rows;
  }
  if (grads) store(g, op.outputs[1], dlogits, buf);
}

}  // namespace

void execute_on_vocab_shard(const Op& op, const Graph& g, const std::vector<void*>& buffers, Communicator& ranks) {
  const Shard& s = *ops::vocab_shard(op, g);
  const int place = RankGroup{s.parts, s.stride}.place(ranks.rank());
  switch (op.kind) {
    case OpKind::embedding: embedding(op, g, buffers, place, ranks.rank()); return;
    case OpKind::embedding_bwd: embedding_bwd(op, g, buffers, place, ranks.rank()); return;
    case OpKind::cross_entropy: cross_entropy(op, g, buffers, s, ranks); return;
    default: throw std::logic_error(fmt::format("'{}' is no vocabulary op", op.name));
  }
}

}  // namespace perfsim::cpu
