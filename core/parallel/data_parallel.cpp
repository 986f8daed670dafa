// Data parallelism and ZeRO on one rank's training graph (see data_parallel.hpp).
#include "core/parallel/data_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>
#include <vector>

#include "core/errors.hpp"
#include "core/graph/rewrite.hpp"

namespace perfsim {

namespace {

// One parameter tensor as its AdamW group names it.
struct Param {
  int weight = -1;   // the tensor the model's ops read (16-bit under mixed precision)
  int master = -1;   // its fp32 master copy, -1 without one
  int grad = -1;
  int m = -1, v = -1;
  int adamw = -1;    // the op that updates it
  int layer = -1;
  bool expert = false;  // a routed expert's: shared by fewer ranks under expert parallelism
};

// The ranks one kind of parameter is replicated over: `shard` consecutive ones (at `stride`)
// hold one sharded copy of its training state, `replicas` such copies (hybrid_shard: one per
// node) at stride · shard.
struct Group {
  int shard = 1;
  int replicas = 1;
  int stride = 1;
  [[nodiscard]] int ranks() const { return shard * replicas; }
};

// The largest divisor of n that is at most limit (and at least 1).
int divisor_at_most(int n, int limit) {
  int d = std::max(1, std::min(n, limit));
  while (n % d != 0) --d;
  return d;
}

// Gradients of one layer that go out in one collective.
struct Bucket {
  int layer = -1;
  bool expert = false;
  double bytes = 0;
  std::vector<std::size_t> params;  // indices into the parameter list
  int after = -1;                   // the op that writes its last gradient
};

int64_t shard_of(int64_t elements, int dp) { return (elements + dp - 1) / dp; }

// Ops to add before and after each op of the graph, then the graph rebuilt with them.
class Insertions {
 public:
  explicit Insertions(std::size_t ops) : m_before(ops), m_after(ops) {}
  void before(int i, Op op) { m_before.at(static_cast<std::size_t>(i)).push_back(std::move(op)); }
  void after(int i, Op op) { m_after.at(static_cast<std::size_t>(i)).push_back(std::move(op)); }
  void apply(Graph& g) {
    std::vector<Op> ops;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      for (Op& o : m_before[i]) ops.push_back(std::move(o));
      ops.push_back(std::move(g.ops[i]));
      for (Op& o : m_after[i]) ops.push_back(std::move(o));
    }
    g.ops = std::move(ops);
    renumber_ops(g);
  }

 private:
  std::vector<std::vector<Op>> m_before, m_after;
};

class DataParallel {
 public:
  DataParallel(Graph& g, const ParallelSpec& p)
      : m_g(g), m_stage(p.sharding_stage()), m_bucket_bytes(p.bucket_bytes),
        m_micro_batches(static_cast<double>(std::max<int64_t>(1, g.workload.grad_accum))),
        m_insert(g.ops.size()) {
    // Dense parameters: every data-parallel and context-parallel rank (consecutive at stride tp).
    const int all = p.gradient_ranks();
    m_dense = Group{p.shard_ranks(), all / p.shard_ranks(), p.tp};
    // Routed experts: the ranks holding the same experts, one in every ep consecutive ones.
    const int expert_all = all / p.ep;
    const int expert_shard = p.shard_ranks() == all ? expert_all : divisor_at_most(expert_all, p.shard_ranks() / p.ep);
    m_expert = Group{expert_shard, expert_all / expert_shard, p.tp * p.ep};
  }

  void run() {
    find_params();
    if (m_params.empty()) return;  // one rank holds every parameter: nothing to share
    const std::vector<Bucket> buckets = bucket_gradients();
    if (m_stage >= 1) shard_optimizer();
    if (m_stage >= 2) free_gradients_after_use();
    for (const Bucket& b : buckets) reduce(b);
    if (m_stage == 1 || m_stage == 2) gather_updated_weights();
    if (m_stage == 3) gather_before_use();
    m_insert.apply(m_g);
  }

 private:
  Tensor& tensor(int id) { return m_g.tensor(id); }

  int add_tensor(const Tensor& like, const std::string& name, std::vector<int64_t> shape, DType dtype,
                 bool transient) {
    Tensor t = like;
    t.id = -1;
    t.name = name;
    t.shape = std::move(shape);
    t.dtype = dtype;
    t.transient = transient;
    t.shard.clear();
    if (transient) t.count = 1;  // one layer's buffer at a time
    return m_g.add_tensor(std::move(t));
  }

  const Group& group_of(const Param& p) const { return p.expert ? m_expert : m_dense; }

  // Marks tensor `id` as this rank's flat part of tensor `of` over p's shard group; when `of` is
  // itself a part (a routed expert's: the rank's experts), the flat part is cut from that one.
  void mark_shard(int id, const Tensor& of, const Param& p) {
    const Group& g = group_of(p);
    std::vector<Shard> parts = of.shard;
    parts.push_back(Shard{parts.empty() ? of.name : parts.front().of, of.shape, -1, g.shard, g.stride});
    tensor(id).shard = std::move(parts);
  }

  // Gradients are averaged over the data-parallel ranks (each rank's loss is the mean of its
  // own micro-batch), so the step equals one rank's step over the whole batch.
  static Op averaged(Op o) {
    o.attrs.average = true;
    return o;
  }

  Op collective(const std::string& name, Collective c, std::vector<int> in, std::vector<int> out, double payload,
                double count, int layer, Stage stage, int stream, DType dtype, int ranks, int stride) const {
    Op o;
    o.name = name;
    o.kind = OpKind::collective;
    o.dtype = dtype;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.attrs.collective = c;
    o.attrs.group = ranks;
    o.attrs.group_stride = stride;
    o.attrs.payload_bytes = payload;
    o.stage = stage;
    o.layer = layer;
    o.count = count;
    o.stream = stream;
    return o;
  }

  // The parameters, from the AdamW groups: {param, grad, m, v} or, with a master copy,
  // {master, grad, m, v, weight} (core/graph/op_kind.hpp).
  void find_params() {
    bool has_optimizer = false;
    for (std::size_t i = 0; i < m_g.ops.size(); ++i) {
      const Op& op = m_g.ops[i];
      if (op.kind != OpKind::adamw) continue;
      has_optimizer = true;
      for (std::size_t k = 0; k + 3 < op.inputs.size();) {
        Param p;
        const bool master = tensor(op.inputs[k]).role == TensorRole::master_weight;
        p.master = master ? op.inputs[k] : -1;
        p.weight = master ? op.inputs.at(k + 4) : op.inputs[k];
        p.grad = op.inputs[k + 1];
        p.m = op.inputs[k + 2];
        p.v = op.inputs[k + 3];
        p.adamw = static_cast<int>(i);
        p.layer = op.layer;
        p.expert = tensor(p.weight).expert;
        // A parameter no other rank holds needs no communication and stays whole.
        if (group_of(p).ranks() > 1) m_params.push_back(p);
        k += master ? 5 : 4;
      }
    }
    if (!has_optimizer)
      throw ConfigError("data parallelism needs a training step: the graph has no optimizer");
    // A parameter belongs to the layer of the first op that reads it: the fused optimizer
    // updates every layer in one op, so its own layer says nothing.
    std::vector<int> reader_layer(m_g.tensors.size(), -2);
    for (const Op& op : m_g.ops) {
      if (op.kind == OpKind::adamw) continue;
      for (int id : op.inputs)
        if (reader_layer[static_cast<std::size_t>(id)] == -2) reader_layer[static_cast<std::size_t>(id)] = op.layer;
    }
    for (Param& p : m_params)
      if (const int l = reader_layer[static_cast<std::size_t>(p.weight)]; l != -2) p.layer = l;
    m_last_writer.assign(m_g.tensors.size(), -1);
    m_first_writer.assign(m_g.tensors.size(), -1);
    for (std::size_t i = 0; i < m_g.ops.size(); ++i) {
      if (m_g.ops[i].stage != Stage::backward) continue;
      for (int id : m_g.ops[i].outputs) {
        const auto t = static_cast<std::size_t>(id);
        m_last_writer[t] = static_cast<int>(i);
        if (m_first_writer[t] < 0) m_first_writer[t] = static_cast<int>(i);
      }
    }
  }

  // Gradients in the order backward finishes them, cut into buckets within each layer.
  std::vector<Bucket> bucket_gradients() {
    std::vector<std::size_t> order(m_params.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return m_last_writer[static_cast<std::size_t>(m_params[a].grad)] <
             m_last_writer[static_cast<std::size_t>(m_params[b].grad)];
    });
    std::vector<Bucket> buckets;
    for (std::size_t k : order) {
      const Param& p = m_params[k];
      const int writer = m_last_writer[static_cast<std::size_t>(p.grad)];
      if (writer < 0) continue;  // never written in backward: nothing to reduce
      // The bucket being filled closes at its cap: 1 MiB for the first, bucket_bytes after.
      const double cap = buckets.size() == 1 ? first_bucket_bytes : m_bucket_bytes;
      const bool full = !buckets.empty() && buckets.back().bytes >= cap;
      if (buckets.empty() || buckets.back().layer != p.layer || buckets.back().expert != p.expert || full)
        buckets.push_back(Bucket{p.layer, p.expert, 0, {}, -1});
      Bucket& b = buckets.back();
      b.bytes += tensor(p.grad).bytes();
      b.params.push_back(k);
      b.after = std::max(b.after, writer);
    }
    return buckets;
  }

  // ZeRO-1 and up: AdamW states and master weights 1/dp each; AdamW reads a gradient shard and
  // (stages 1-2) updates a shard of the weights.
  void shard_optimizer() {
    std::map<int, int> replace;  // tensor id -> the shard AdamW uses instead
    for (Param& p : m_params) {
      const int n = group_of(p).shard;
      const int64_t elements = tensor(p.grad).elements();
      m_adamw_saved[p.adamw] += elements - shard_of(elements, n);
      for (int id : {p.m, p.v, p.master})
        if (id >= 0) {
          mark_shard(id, tensor(id), p);
          tensor(id).shape = {shard_of(tensor(id).elements(), n)};
        }
      const Tensor grad = tensor(p.grad);
      const DType grad_dtype = p.master >= 0 ? DType::fp32 : grad.dtype;
      const int shard = add_tensor(grad, grad.name + ".shard", {shard_of(grad.elements(), n)}, grad_dtype, false);
      mark_shard(shard, grad, p);
      m_grad_shard[p.grad] = shard;
      replace[p.grad] = shard;
      if (m_stage <= 2) {
        const Tensor w = tensor(p.weight);
        const int ws = add_tensor(w, w.name + ".shard", {shard_of(w.elements(), n)}, w.dtype, false);
        mark_shard(ws, w, p);
        m_weight_shard[p.weight] = ws;
        replace[p.weight] = ws;
      } else {
        mark_shard(p.weight, tensor(p.weight), p);
        tensor(p.weight).shape = {shard_of(tensor(p.weight).elements(), n)};
      }
    }
    for (Op& op : m_g.ops) {
      if (op.kind != OpKind::adamw) continue;
      for (int& id : op.inputs)
        if (const auto it = replace.find(id); it != replace.end()) id = it->second;
      for (int& id : op.outputs)
        if (const auto it = replace.find(id); it != replace.end()) id = it->second;
      // Each parameter it updates now a shard (a fused AdamW: of groups sharded differently).
      if (const auto it = m_adamw_saved.find(static_cast<int>(&op - m_g.ops.data())); it != m_adamw_saved.end())
        op.attrs.elements -= it->second;
    }
    // The step's own all-reduces of gradients over other groups (the sequence-parallel norms'
    // over tp, the tied embedding's between the pipeline's edge stages) run after the
    // reduce-scatters: on the shards, which hold the same positions on every rank they join.
    for (Op& op : m_g.ops) {
      if (op.kind != OpKind::collective || op.stage != Stage::optimizer) continue;
      bool sharded = false;
      for (auto* ids : {&op.inputs, &op.outputs})
        for (int& id : *ids)
          if (const auto it = replace.find(id); it != replace.end() && tensor(id).role == TensorRole::gradient) {
            id = it->second;
            sharded = true;
          }
      if (!sharded || op.attrs.payload_bytes <= 0) continue;
      // The payload is now the shards'.
      double bytes = 0;
      for (int id : op.inputs) bytes += tensor(id).bytes() * tensor(id).count;
      op.attrs.payload_bytes = bytes;
    }
  }

  // ZeRO-2 and up: a full gradient lives from its first write to its bucket's reduce-scatter,
  // every micro-batch, so its first writer no longer accumulates into it.
  void free_gradients_after_use() {
    for (const Param& p : m_params) {
      const int first = m_first_writer[static_cast<std::size_t>(p.grad)];
      // An op that writes this gradient first and adds into another (a tied embedding's
      // backward: the position gradient first, the table's after lm_head's) keeps accumulating
      // into both, so this gradient stays a persistent, zeroed buffer.
      if (first >= 0 && accumulates_into_other(m_g.ops[static_cast<std::size_t>(first)], p.grad, first)) continue;
      tensor(p.grad).transient = true;
      tensor(p.grad).count = 1;
      if (first < 0) continue;
      Op& op = m_g.ops[static_cast<std::size_t>(first)];
      const auto self = std::find(op.inputs.begin(), op.inputs.end(), p.grad);
      if (self != op.inputs.end()) {
        op.inputs.erase(self);
        op.attrs.accumulate = false;
      }
    }
  }

  bool accumulates_into_other(const Op& op, int grad, int index) const {
    if (!op.attrs.accumulate) return false;
    for (int out : op.outputs)
      if (out != grad && m_first_writer[static_cast<std::size_t>(out)] != index) return true;
    return false;
  }

  double layer_count(const Param& p) const {
    // The weight's count: how many layers a sampled layer's tensor stands for.
    return m_g.tensor(p.weight).count;
  }

  std::string bucket_name(int layer, const char* what) {
    const int n = m_bucket_index[layer]++;
    const std::string base = fmt::format("{}.bucket{}", what, n);
    return layer >= 0 ? fmt::format("layer{}.{}", layer, base) : base;
  }

  void reduce(const Bucket& b) {
    std::vector<int> grads;
    double elements = 0, count = 1;
    for (std::size_t k : b.params) {
      const Param& p = m_params[k];
      grads.push_back(p.grad);
      elements += static_cast<double>(tensor(p.grad).elements());
      count = layer_count(p);
    }
    const Tensor first = tensor(grads.front());
    const Group& g = group_of(m_params[b.params.front()]);
    if (m_stage == 0) {
      // DDP copies the gradients into a bucket buffer, all-reduces it and copies back.
      const int buffer = add_tensor(first, bucket_name(b.layer, "ddp") + ".buffer",
                                    {static_cast<int64_t>(elements)}, first.dtype, false);
      tensor(buffer).count = count;
      std::vector<int> io = grads;
      io.push_back(buffer);
      m_insert.after(b.after, averaged(collective(bucket_name(b.layer, "ddp.all_reduce"), Collective::all_reduce,
                                                  io, io, b.bytes, count, b.layer, Stage::backward,
                                                  gradient_stream, first.dtype, g.ranks(), g.stride)));
      return;
    }
    std::vector<int> shards;
    for (int g : grads) shards.push_back(m_grad_shard.at(g));
    const double per_step = m_stage >= 2 ? count * m_micro_batches : count;
    m_insert.after(b.after, averaged(collective(bucket_name(b.layer, "zero.reduce_scatter"),
                                                Collective::reduce_scatter, grads, shards, b.bytes, per_step,
                                                b.layer, Stage::backward, gradient_stream, first.dtype, g.shard,
                                                g.stride)));
    // hybrid_shard: the shards then averaged over the copies on other nodes.
    if (g.replicas > 1)
      m_insert.after(b.after, averaged(collective(bucket_name(b.layer, "hsdp.all_reduce"), Collective::all_reduce,
                                                  shards, shards, b.bytes / g.shard, per_step, b.layer,
                                                  Stage::backward, gradient_stream, first.dtype, g.replicas,
                                                  g.stride * g.shard)));
  }

  // ZeRO-1/2: after the step every rank all-gathers the others' updated weight shards.
  void gather_updated_weights() {
    int last_adamw = -1;
    std::map<std::pair<int, bool>, std::vector<const Param*>> by_layer;
    for (const Param& p : m_params) {
      last_adamw = std::max(last_adamw, p.adamw);
      by_layer[{p.layer, p.expert}].push_back(&p);
    }
    for (const auto& [key, params] : by_layer) {
      const int layer = key.first;
      const Group& g = group_of(*params.front());
      std::vector<int> shards, weights;
      double bytes = 0;
      for (const Param* p : params) {
        shards.push_back(m_weight_shard.at(p->weight));
        weights.push_back(p->weight);
        bytes += tensor(p->weight).bytes();
      }
      const std::string what = key.second ? "zero.all_gather.experts" : "zero.all_gather";
      const std::string name = layer >= 0 ? fmt::format("layer{}.{}", layer, what) : what;
      m_insert.after(last_adamw, collective(name, Collective::all_gather, shards, weights, bytes,
                                            layer_count(*params.front()), layer, Stage::optimizer, 0,
                                            tensor(weights.front()).dtype, g.shard, g.stride));
    }
  }

  // ZeRO-3: each layer's weights gathered before its forward and again before its backward,
  // one layer ahead; the rest of the model's weights once, before the first op.
  void gather_before_use() {
    std::map<std::pair<int, bool>, std::vector<const Param*>> by_layer;
    for (const Param& p : m_params) by_layer[{p.layer, p.expert}].push_back(&p);
    std::map<int, int> first_fwd, first_bwd;  // layer -> first op of that pass
    int first_op_fwd = -1, first_op_bwd = -1;
    for (std::size_t i = 0; i < m_g.ops.size(); ++i) {
      const Op& op = m_g.ops[i];
      if (op.kind == OpKind::adamw) continue;
      if (op.stage == Stage::forward) {
        if (first_op_fwd < 0) first_op_fwd = static_cast<int>(i);
        if (op.layer >= 0 && !first_fwd.count(op.layer)) first_fwd[op.layer] = static_cast<int>(i);
      } else if (op.stage == Stage::backward) {
        if (first_op_bwd < 0) first_op_bwd = static_cast<int>(i);
        if (op.layer >= 0 && !first_bwd.count(op.layer)) first_bwd[op.layer] = static_cast<int>(i);
      }
    }
    const double micro = m_micro_batches;
    for (const auto& [key, params] : by_layer) {
      const int layer = key.first;
      if (layer < 0) {
        // Outside the layers: gathered once, kept for forward and backward.
        gather(params, "", -1, [](const Op& op) { return op.stage != Stage::optimizer; }, 0, micro);
        continue;
      }
      // Forward: issued as the layer before starts (the first layer: as the step starts).
      const auto prev = first_fwd.find(layer - 1);
      const int fwd_at = prev != first_fwd.end() ? prev->second : first_op_fwd;
      gather(params, "", layer, [](const Op& op) { return op.stage == Stage::forward; }, fwd_at, micro);
      // Backward runs the layers in reverse: issued as the layer after starts its backward.
      const auto next = first_bwd.find(layer + 1);
      const int bwd_at = next != first_bwd.end() ? next->second : first_op_bwd;
      if (bwd_at >= 0)
        gather(params, ".bwd", layer, [](const Op& op) { return op.stage == Stage::backward; }, bwd_at, micro);
    }
  }

  // Gathers `params` into full-size transient copies that the ops `uses` selects read instead
  // of the shards, issued before op `at`.
  template <class Uses>
  void gather(const std::vector<const Param*>& params, const char* suffix, int layer, Uses uses, int at,
              double micro) {
    std::vector<int> shards, full;
    double bytes = 0;
    std::map<int, int> replace;
    for (const Param* p : params) {
      // The full shape is the gradient's: the weight itself now holds a shard.
      const Tensor w = tensor(p->weight);
      const int gathered = add_tensor(w, w.name + ".gathered" + suffix, m_g.tensor(p->grad).shape, w.dtype, true);
      // The gathered copy is the rank's whole part again: a tensor-parallel slice, an expert
      // share (every level of the weight's shards but ZeRO's own).
      if (!w.shard.empty()) {
        tensor(gathered).shard = w.shard;
        tensor(gathered).shard.pop_back();
      }
      shards.push_back(p->weight);
      full.push_back(gathered);
      bytes += tensor(gathered).bytes();
      replace[p->weight] = gathered;
    }
    bool read = false;
    for (std::size_t i = 0; i < m_g.ops.size(); ++i) {
      Op& op = m_g.ops[i];
      if (op.kind == OpKind::adamw || !uses(op)) continue;
      if (layer >= 0 && op.layer != layer) continue;
      for (int& id : op.inputs)
        if (const auto it = replace.find(id); it != replace.end()) id = it->second, read = true;
    }
    if (!read) return;  // no op of that pass reads these weights
    const double count = layer >= 0 ? m_g.tensor(params.front()->weight).count * micro : 1.0;
    const Group& g = group_of(*params.front());
    const std::string name = fmt::format("{}zero.all_gather{}{}", layer >= 0 ? fmt::format("layer{}.", layer) : "",
                                         params.front()->expert ? ".experts" : "", suffix);
    m_insert.before(at, collective(name, Collective::all_gather, shards, full, bytes, count, layer,
                                   m_g.ops[static_cast<std::size_t>(at)].stage, gather_stream,
                                   tensor(full.front()).dtype, g.shard, g.stride));
  }

  Graph& m_g;
  Group m_dense, m_expert;
  int m_stage;
  double m_bucket_bytes;
  double m_micro_batches;
  Insertions m_insert;
  std::vector<Param> m_params;
  std::vector<int> m_last_writer, m_first_writer;  // per tensor, in backward
  std::map<int, int> m_grad_shard, m_weight_shard;
  std::map<int, int> m_bucket_index;
  std::map<int, int64_t> m_adamw_saved;  // AdamW op -> the elements sharding takes off it
};

}  // namespace

// Each data-parallel rank reads its own micro-batch: its part, along the batch, of the batch all
// dp ranks read (the ranks dp apart in the global order, tp·cp between them). Context
// parallelism cuts each of its sequences once more into the rank's two load-balanced chunks
// (core/builders/rank.hpp), the tokens' order in the rank's graph.
void mark_input_shards(Graph& g, const ParallelSpec& p) {
  if (p.dp <= 1 && p.cp <= 1) return;
  for (Tensor& t : g.tensors) {
    if (t.role != TensorRole::input || t.shape.empty()) continue;
    constexpr std::string_view host = ".host";
    std::string of = t.name;
    if (t.on_host() && of.size() > host.size() && of.compare(of.size() - host.size(), host.size(), host) == 0)
      of.resize(of.size() - host.size());
    if (p.cp <= 1) {
      std::vector<int64_t> whole = t.shape;
      whole[0] *= p.dp;
      t.shard = {Shard{of, whole, 0, p.dp, p.tp * p.cp}};
      continue;
    }
    const int64_t seq = g.workload.seq, batch = t.elements() * p.cp / seq;
    Shard chunks{of, {batch, seq}, 1, p.cp, p.cp_stride()};
    chunks.balanced = true;
    t.shard = {Shard{of, {batch * p.dp, seq}, 0, p.dp, p.dp_stride()}, chunks};
  }
}

void apply_data_parallel(Graph& g, const ParallelSpec& p) {
  mark_input_shards(g, p);
  if (p.gradient_ranks() == 1) return;  // no rank shares this one's parameters
  DataParallel(g, p).run();
  g.check();
}

}  // namespace perfsim
