// Shared builder pieces: tensors and ops with layer-sampling counts, the rank's weights and
// one transformer layer's forward pass (norm, attention, MLP, residuals) with its
// tensor-parallel collectives (ring attention under context parallelism: context_parallel.cpp).
#include "core/builders/common.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/errors.hpp"
#include "core/config/parallel.hpp"

namespace perfsim::build {

std::string layer_name(int layer, const std::string& what) {
  return layer >= 0 ? fmt::format("layer{}.{}", layer, what) : what;
}

void check_positions(const ModelConfig& m, int64_t positions, const char* what) {
  if (!m.rope && !m.alibi && positions > m.max_seq)
    throw ConfigError(fmt::format(
        "{} needs {} positions but model '{}' has learned positions for only max_seq = {}; "
        "shorten the sequence or raise max_seq",
        what, positions, m.name, m.max_seq));
}

GraphBuilder::GraphBuilder(const ModelConfig& m, const Workload& w, const BuildOptions& o)
    : m_model(m) {
  validate(m);
  validate(w);
  m_rank = rank_shape(m, w, o);
  m_graph.model = m.name;
  m_graph.workload = w;
  // A pipeline stage is a model of its own layers: layer_scale() scales within the stage.
  const int64_t layers = m_rank.layers;
  m_graph.layers_total = layers;
  m_graph.layers_built = (o.layers <= 0 || o.layers >= layers) ? layers : o.layers;
  const int chunks = m_rank.chunks();
  m_chunk_begin.assign(1, 0);
  for (int c = 0; c < chunks; ++c) {
    const int64_t built = m_graph.layers_built == layers ? m_rank.chunk_layers[static_cast<std::size_t>(c)]
                                                         : stage_layers(m_graph.layers_built, chunks, c);
    m_chunk_begin.push_back(m_chunk_begin.back() + static_cast<int>(built));
  }
}

std::string GraphBuilder::lname(int layer, const std::string& what) const {
  if (layer < 0) return layer_name(layer, what);
  // The chunk holding the graph's layer `layer`, and the model's index of it.
  std::size_t c = 0;
  while (c + 2 < m_chunk_begin.size() && layer >= m_chunk_begin[c + 1]) ++c;
  return layer_name(static_cast<int>(m_rank.chunk_first_layer[c]) + layer - m_chunk_begin[c], what);
}

int GraphBuilder::tensor(std::string name, std::vector<int64_t> shape, TensorRole role, int layer,
                         DType dtype) {
  Tensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.role = role;
  t.dtype = dtype;
  t.count = (layer >= 0 && is_persistent(role)) ? layer_scale() : 1.0;
  return m_graph.add_tensor(std::move(t));
}

int GraphBuilder::input(std::string name, int64_t elements) {
  return tensor(std::move(name), {elements}, TensorRole::input, -1, DType::int32);
}

void GraphBuilder::upload(int dst) {
  if (!m_graph.workload.host_data) return;
  Tensor host = m_graph.tensor(dst);
  host.name += ".host";
  host.residence = Residence::host_pageable;  // what malloc returns; pinned_memory changes it
  const std::string dst_name = m_graph.tensor(dst).name;
  const int src = m_graph.add_tensor(std::move(host));
  OpAttrs a;
  a.elements = m_graph.tensor(dst).elements();
  // Forward stage: counted once per micro-batch, like the forward ops.
  const int id = op(OpKind::copy, "upload." + dst_name, {src}, {dst}, a, -1, Stage::forward);
  m_graph.ops[static_cast<std::size_t>(id)].dtype = m_graph.tensor(dst).dtype;  // moves, computes nothing
}

int GraphBuilder::activation_like(std::string name, int like) {
  const Tensor& l = m_graph.tensor(like);
  return tensor(std::move(name), l.shape, TensorRole::activation, -1, l.dtype);
}

int GraphBuilder::op(OpKind kind, std::string name, std::vector<int> inputs,
                     std::vector<int> outputs, const OpAttrs& attrs, int layer, Stage stage) {
  Op o;
  o.name = std::move(name);
  o.kind = kind;
  o.inputs = std::move(inputs);
  o.outputs = std::move(outputs);
  o.attrs = attrs;
  o.layer = layer;
  o.chunk = m_chunk;
  o.stage = stage;
  o.count = layer >= 0 ? layer_scale() : 1.0;
  if (stage == Stage::forward || stage == Stage::backward) o.count *= m_pass_multiplier;
  return m_graph.add_op(std::move(o));
}

int GraphBuilder::param(std::string name, std::vector<int64_t> shape, int layer, bool expert) {
  const int id = tensor(std::move(name), std::move(shape), TensorRole::weight, layer);
  m_graph.tensor(id).expert = expert;
  m_params.push_back({id, layer});
  return id;
}

int GraphBuilder::tp_param(std::string name, std::vector<int64_t> shape, int dim, int layer) {
  const int id = param(name, shape, layer);
  if (m_rank.tensor_parallel()) {
    std::vector<int64_t> whole = shape;
    whole[static_cast<std::size_t>(dim)] *= m_rank.tp;
    m_graph.tensor(id).shard = {Shard{std::move(name), std::move(whole), dim, m_rank.tp, m_rank.tp_stride}};
  }
  return id;
}

void GraphBuilder::add_mlp_weights(int l, LayerWeights& lw, int64_t f, const std::string& prefix) {
  const int64_t h = m_model.hidden;
  auto n = [&](const char* what) { return lname(l, prefix + what); };
  // Column-parallel gate/up/fc1 split their outputs (dim 1), row-parallel down/fc2 their inputs.
  if (m_model.activation == Activation::swiglu) {
    lw.gate = tp_param(n(".gate_proj.weight"), {h, f}, 1, l);
    lw.up = tp_param(n(".up_proj.weight"), {h, f}, 1, l);
    lw.down = tp_param(n(".down_proj.weight"), {f, h}, 0, l);
  } else {
    lw.gate = tp_param(n(".fc1.weight"), {h, f}, 1, l);
    lw.down = tp_param(n(".fc2.weight"), {f, h}, 0, l);
  }
}

NormWeights GraphBuilder::add_norm_weights(const std::string& prefix, int layer) {
  NormWeights nw;
  nw.gamma = param(lname(layer, prefix + ".weight"), {m_model.hidden}, layer);
  if (m_model.norm == NormKind::layernorm)
    nw.beta = param(lname(layer, prefix + ".bias"), {m_model.hidden}, layer);
  return nw;
}

ModelWeights GraphBuilder::add_weights() {
  const ModelConfig& m = m_model;
  const RankShape& r = m_rank;
  // Column-parallel (q, k, v, gate, up, lm_head) split their outputs, row-parallel (o, down)
  // their inputs, the embedding its vocabulary rows (Shoeybi et al. 2019, §3).
  const int64_t h = m.hidden, q = r.q_dim, kv = r.kv_dim, f = r.ffn, vocab = r.vocab;
  ModelWeights mw;
  // A last stage with tied embeddings keeps its own copy of the table for the head (Megatron).
  if (r.first_stage() || (r.last_stage() && m.tied_embeddings))
    mw.embedding = tp_param("embedding.weight", {vocab, h}, 0, -1);
  if (!m.rope && !m.alibi && r.first_stage()) mw.positions = param("position_embedding.weight", {m.max_seq, h}, -1);
  for (int l = 0; l < static_cast<int>(layers_built()); ++l) {
    LayerWeights lw;
    lw.attn_norm = add_norm_weights("attn_norm", l);
    lw.q = tp_param(lname(l, "attn.q_proj.weight"), {h, q}, 1, l);
    lw.k = tp_param(lname(l, "attn.k_proj.weight"), {h, kv}, 1, l);
    lw.v = tp_param(lname(l, "attn.v_proj.weight"), {h, kv}, 1, l);
    lw.o = tp_param(lname(l, "attn.o_proj.weight"), {q, h}, 0, l);
    lw.mlp_norm = add_norm_weights("mlp_norm", l);
    if (!r.moe()) {
      add_mlp_weights(l, lw, f);
    } else {
      add_expert_weights(l, lw);
      if (r.shared_ffn > 0) add_mlp_weights(l, lw, r.shared_ffn, "mlp.shared");
    }
    mw.layers.push_back(lw);
  }
  if (r.last_stage()) {
    mw.final_norm = add_norm_weights("final_norm", -1);
    if (!m.tied_embeddings) mw.lm_head = tp_param("lm_head.weight", {h, vocab}, 1, -1);
  }
  return mw;
}

int GraphBuilder::linear(const std::string& name, int x, int w, int64_t m, int64_t n, int64_t k,
                         int layer) {
  const int y = tensor(name + ".out", {m, n}, TensorRole::activation);
  OpAttrs a;
  a.m = m, a.n = n, a.k = k;
  op(OpKind::gemm, name, {x, w}, {y}, a, layer, Stage::forward);
  return y;
}

int GraphBuilder::norm(const std::string& name, int x, const NormWeights& nw, int64_t rows,
                       int layer, Stage stage) {
  const int y = tensor(name + ".out", {rows, m_model.hidden}, TensorRole::activation);
  OpAttrs a;
  a.rows = rows;
  a.cols = m_model.hidden;
  a.elements = rows * m_model.hidden;
  if (m_model.norm == NormKind::layernorm)
    op(OpKind::layernorm, name, {x, nw.gamma, nw.beta}, {y}, a, layer, stage);
  else
    op(OpKind::rmsnorm, name, {x, nw.gamma}, {y}, a, layer, stage);
  return y;
}

int GraphBuilder::embed(int tokens, const ModelWeights& mw, int64_t batch, int64_t seq_q,
                        int64_t position) {
  const int64_t rows = batch * seq_q;
  const int x = tensor("embedding.out", {rows, m_model.hidden}, TensorRole::activation);
  OpAttrs a;
  a.rows = rows;
  a.cols = m_model.hidden;
  a.elements = rows * m_model.hidden;
  a.batch = batch;
  a.seq_q = seq_q;
  a.position = position;  // row t sits at position + t % seq_q (learned positions)
  a.cp = m_rank.cp;       // or in the rank's chunks of the sequence (context parallelism)
  a.cp_stride = m_rank.cp_stride;
  std::vector<int> in{tokens, mw.embedding};
  if (mw.positions >= 0) in.push_back(mw.positions);
  op(OpKind::embedding, "embedding", std::move(in), {x}, a, -1, Stage::forward);
  return x;
}

int GraphBuilder::lm_head(int x, const ModelWeights& mw, int64_t rows) {
  const int64_t h = m_model.hidden, v = m_rank.vocab;
  if (mw.lm_head >= 0) return linear("lm_head", x, mw.lm_head, rows, v, h, -1);
  // Tied: logits[rows, V] = x[rows, h] · E^T with the embedding table E stored [V, h].
  const int y = tensor("lm_head.out", {rows, v}, TensorRole::activation);
  OpAttrs a;
  a.m = rows, a.n = v, a.k = h;
  a.trans_b = true;
  op(OpKind::gemm, "lm_head", {x, mw.embedding}, {y}, a, -1, Stage::forward);
  return y;
}

OpAttrs GraphBuilder::attention_attrs(const AttentionShape& s) const {
  OpAttrs a;
  a.batch = s.batch;
  a.heads = m_rank.heads;
  a.kv_heads = m_rank.kv_heads;
  a.head_dim = m_model.head_dim();
  a.seq_q = s.seq_q;
  a.seq_kv = s.seq_kv;
  a.kv_capacity = s.kv_capacity;
  a.causal = true;
  a.alibi_heads = m_model.alibi ? m_model.heads : 0;
  a.position = s.position;
  a.rows = s.batch * m_rank.heads * s.seq_q;  // softmax rows
  a.cols = s.seq_kv;
  return a;
}

OpAttrs GraphBuilder::softmax_attrs(const AttentionShape& s) const {
  OpAttrs a = attention_attrs(s);
  a.kv_capacity = 0;  // reads only scores: no K/V operand whose capacity would matter
  return a;
}

OpAttrs GraphBuilder::rope_attrs(const AttentionShape& s, int64_t heads) const {
  OpAttrs a;
  a.batch = s.batch;
  a.heads = heads;
  a.head_dim = m_model.head_dim();
  a.seq_q = s.seq_q;
  a.position = s.position;
  a.rows = s.batch * s.seq_q;
  a.elements = a.rows * heads * a.head_dim;
  a.cp = m_rank.cp;  // the rows are the rank's chunks of each sequence (context parallelism)
  a.cp_stride = m_rank.cp_stride;
  return a;
}

LayerCache GraphBuilder::add_cache(int layer, int64_t batch, int64_t capacity, bool attend) {
  LayerCache c;
  // Each tensor-parallel rank caches its own KV heads.
  const std::vector<int64_t> shape{batch, capacity, m_rank.kv_heads, m_model.head_dim()};
  c.k = tensor(lname(layer, "attn.k_cache"), shape, TensorRole::kv_cache, layer);
  c.v = tensor(lname(layer, "attn.v_cache"), shape, TensorRole::kv_cache, layer);
  c.capacity = capacity;
  c.attend = attend;
  return c;
}

LayerActivations GraphBuilder::forward_layer(int l, int x, const LayerWeights& lw,
                                             const AttentionShape& s, const LayerCache& cache) {
  const ModelConfig& m = m_model;
  const RankShape& r = m_rank;
  // Tensor parallelism (Shoeybi et al. 2019, Figure 3): QKV and the MLP's first GEMMs are
  // column-parallel, o_proj and the last MLP GEMM row-parallel; the norms and residuals run on
  // the whole hidden size over R rows (T/tp with sequence parallelism, Korthikanti et al. 2022).
  const int64_t t = s.batch * s.seq_q, rows = r.rows(t), h = m.hidden, q = r.q_dim, kv = r.kv_dim,
                f = r.ffn;
  auto n = [&](const char* what) { return lname(l, what); };
  LayerActivations a;
  a.x = x;

  // Attention block.
  a.xn1 = norm(n("attn_norm"), x, lw.attn_norm, rows, l);
  a.qkv_in = enter_tp(n("attn_norm"), a.xn1, t, l, Stage::forward);
  a.q = linear(n("attn.q_proj"), a.qkv_in, lw.q, t, q, h, l);
  a.k = linear(n("attn.k_proj"), a.qkv_in, lw.k, t, kv, h, l);
  a.v = linear(n("attn.v_proj"), a.qkv_in, lw.v, t, kv, h, l);
  a.q_att = a.q;
  a.k_att = a.k;
  const VarlenAttention* vl = s.varlen;
  if (m.rope) {
    // A packed step's rows each rotate by their own position (varlen_rope reads them).
    const OpKind kind = vl != nullptr ? OpKind::varlen_rope : OpKind::rope;
    auto rope_in = [&](int x) { return vl != nullptr ? std::vector<int>{x, vl->positions} : std::vector<int>{x}; };
    a.q_att = activation_like(n("attn.rope_q.out"), a.q);
    op(kind, n("attn.rope_q"), rope_in(a.q), {a.q_att}, rope_attrs(s, r.heads), l, Stage::forward);
    a.k_att = activation_like(n("attn.rope_k.out"), a.k);
    op(kind, n("attn.rope_k"), rope_in(a.k), {a.k_att}, rope_attrs(s, r.kv_heads), l, Stage::forward);
  }
  a.k_src = a.k_att;
  a.v_src = a.v;
  if (vl != nullptr) {
    varlen_attention(l, a, *vl, cache);
  } else if (cache.k >= 0) {
    OpAttrs ap;
    ap.batch = s.batch;
    ap.seq_q = s.seq_q;
    ap.kv_heads = r.kv_heads;
    ap.head_dim = m.head_dim();
    ap.kv_capacity = cache.capacity;
    ap.position = s.position;
    op(OpKind::kv_append, n("attn.k_append"), {a.k_att, cache.k}, {cache.k}, ap, l,
       Stage::forward);
    op(OpKind::kv_append, n("attn.v_append"), {a.v, cache.v}, {cache.v}, ap, l, Stage::forward);
    if (cache.attend) a.k_src = cache.k, a.v_src = cache.v;
  }
  if (vl != nullptr) {
    // varlen_attention wrote a.context.
  } else if (r.context_parallel()) {
    ring_attention(l, a, s);
  } else {
    const OpAttrs aa = attention_attrs(s);
    const std::vector<int64_t> score_shape{s.batch, r.heads, s.seq_q, s.seq_kv};
    a.scores = tensor(n("attn.scores.out"), score_shape, TensorRole::activation);
    op(OpKind::attn_scores, n("attn.scores"), {a.q_att, a.k_src}, {a.scores}, aa, l,
       Stage::forward);
    a.probs = tensor(n("attn.softmax.out"), score_shape, TensorRole::activation);
    op(OpKind::attn_softmax, n("attn.softmax"), {a.scores}, {a.probs}, softmax_attrs(s), l,
       Stage::forward);
    a.context = tensor(n("attn.context.out"), {t, q}, TensorRole::activation);
    op(OpKind::attn_context, n("attn.context"), {a.probs, a.v_src}, {a.context}, aa, l,
       Stage::forward);
  }
  const int o_partial = linear(n("attn.o_proj"), a.context, lw.o, t, h, q, l);
  a.attn_out = leave_tp(n("attn.o_proj"), o_partial, t, l, Stage::forward);
  OpAttrs ra;
  ra.elements = rows * h;
  a.x1 = tensor(n("attn.residual.out"), {rows, h}, TensorRole::activation);
  op(OpKind::residual_add, n("attn.residual"), {x, a.attn_out}, {a.x1}, ra, l, Stage::forward);

  // MLP block.
  a.xn2 = norm(n("mlp_norm"), a.x1, lw.mlp_norm, rows, l);
  a.mlp_in = enter_tp(n("mlp_norm"), a.xn2, t, l, Stage::forward);
  const bool swiglu = m.activation == Activation::swiglu;
  int down_partial = -1;
  if (r.moe()) {
    down_partial = moe_forward(l, a, lw, t);
  } else {
    down_partial = dense_mlp(l, a, lw, a.mlp_in, t, f);
  }
  a.mlp_out = leave_tp(n(swiglu ? "mlp.down_proj" : "mlp.fc2"), down_partial, t, l, Stage::forward);
  a.out = tensor(n("mlp.residual.out"), {rows, h}, TensorRole::activation);
  op(OpKind::residual_add, n("mlp.residual"), {a.x1, a.mlp_out}, {a.out}, ra, l, Stage::forward);
  return a;
}

void GraphBuilder::varlen_attention(int l, LayerActivations& a, const VarlenAttention& v, const LayerCache& pages) {
  const RankShape& r = m_rank;
  const int64_t d = m_model.head_dim();
  auto n = [&](const char* what) { return lname(l, what); };
  // The step's new K/V rows go to their page slots, then every query attends its sequence's
  // pages (cached rows and the ones just written) through the block table.
  OpAttrs ap;
  ap.kv_block = v.kv_block;
  ap.rows = v.tokens;
  ap.seq_q = v.tokens;
  ap.kv_heads = r.kv_heads;
  ap.head_dim = d;
  op(OpKind::varlen_kv_append, n("attn.k_append"), {a.k_att, pages.k, v.slots}, {pages.k}, ap, l, Stage::forward);
  op(OpKind::varlen_kv_append, n("attn.v_append"), {a.v, pages.v, v.slots}, {pages.v}, ap, l, Stage::forward);
  a.k_src = pages.k;
  a.v_src = pages.v;
  OpAttrs fa;
  fa.causal = true;
  fa.batch = v.seqs;
  fa.rows = v.tokens;
  fa.heads = r.heads;
  fa.kv_heads = r.kv_heads;
  fa.head_dim = d;
  fa.seq_q = v.max_q;
  fa.seq_kv = v.max_kv;
  fa.kv_block = v.kv_block;
  fa.kv_capacity = v.kv_block * v.table_width;
  fa.kv_pairs = v.kv_pairs;
  fa.cols = v.kv_rows;
  fa.decode_seqs = v.decode_seqs;
  fa.alibi_heads = m_model.alibi ? m_model.heads : 0;
  a.context = tensor(n("attn.context.out"), {v.tokens, r.q_dim}, TensorRole::activation);
  const int lse = tensor(n("attn.flash_attention.lse"), {r.heads, v.tokens}, TensorRole::activation);
  op(OpKind::varlen_flash_attention, n("attn.flash_attention"),
     {a.q_att, pages.k, pages.v, v.table, v.query_start, v.kv_len}, {a.context, lse}, fa, l, Stage::forward);
}

int GraphBuilder::dense_mlp(int l, LayerActivations& a, const LayerWeights& lw, int x, int64_t t, int64_t f,
                            const std::string& prefix) {
  const int64_t h = m_model.hidden;
  auto n = [&](const char* what) { return lname(l, prefix + (what + 3)); };  // what: "mlp.…
  OpAttrs pa;
  pa.elements = t * f;
  int down_partial = -1;
  if (m_model.activation == Activation::swiglu) {
    a.gate = linear(n("mlp.gate_proj"), x, lw.gate, t, f, h, l);
    a.up = linear(n("mlp.up_proj"), x, lw.up, t, f, h, l);
    a.act = tensor(n("mlp.silu_mul.out"), {t, f}, TensorRole::activation);
    op(OpKind::silu_mul, n("mlp.silu_mul"), {a.gate, a.up}, {a.act}, pa, l, Stage::forward);
    down_partial = linear(n("mlp.down_proj"), a.act, lw.down, t, h, f, l);
  } else {
    a.gate = linear(n("mlp.fc1"), x, lw.gate, t, f, h, l);
    a.act = tensor(n("mlp.gelu.out"), {t, f}, TensorRole::activation);
    op(OpKind::gelu, n("mlp.gelu"), {a.gate}, {a.act}, pa, l, Stage::forward);
    down_partial = linear(n("mlp.fc2"), a.act, lw.down, t, h, f, l);
  }
  return down_partial;
}

}  // namespace perfsim::build
