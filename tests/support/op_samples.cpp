// The one-op samples of every kind (see op_samples.hpp). Shapes are small and odd where the
// kernels allow it (rows that are not a power of two, capacities past the valid rows, GQA), so
// edge handling is exercised; head dimensions are those the GPU kernels run.
#include "op_samples.hpp"

#include <fmt/format.h>

#include <numeric>
#include <utility>

namespace perfsim::test {

namespace {

using Shape = std::vector<int64_t>;

// Builds one sample: operands in the order of the kind's line in core/graph/op_kind.hpp, each
// of the kind's fixed dtype or the sample's.
class Sample {
 public:
  Sample(OpKind kind, DType dtype, std::string variant) : m_dtype(dtype) {
    m_op.kind = kind;
    m_op.dtype = dtype;
    m_op.name = std::string(name_of(kind));
    m_label = fmt::format("{} {} ({})", name_of(kind), variant, name_of(dtype));
  }
  int in(const std::string& name, Shape shape, TensorRole role = TensorRole::input) {
    const DType t = fixed_operand_dtype(m_op.kind, false, m_op.inputs.size()).value_or(m_dtype);
    return in_as(name, std::move(shape), t, role);
  }
  int in_as(const std::string& name, Shape shape, DType t, TensorRole role = TensorRole::input) {
    const int id = add(name, std::move(shape), t, role);
    m_op.inputs.push_back(id);
    return id;
  }
  int out(const std::string& name, Shape shape) {
    const DType t = fixed_operand_dtype(m_op.kind, true, m_op.outputs.size()).value_or(m_dtype);
    const int id = add(name, std::move(shape), t, TensorRole::activation);
    m_op.outputs.push_back(id);
    return id;
  }
  OpAttrs& attrs() { return m_op.attrs; }
  Tensor& tensor(int id) { return m_graph.tensor(id); }
  void write(int id, std::vector<int32_t> values) { m_writes[id] = std::move(values); }
  OpSample done() {
    m_graph.model = "op sample";
    m_graph.add_op(m_op);
    m_graph.check();
    return {m_label, std::move(m_graph), std::move(m_writes)};
  }

 private:
  int add(const std::string& name, Shape shape, DType t, TensorRole role) {
    Tensor x;
    x.name = name;
    x.shape = std::move(shape);
    x.dtype = t;
    x.role = role;
    return m_graph.add_tensor(std::move(x));
  }

  DType m_dtype;
  Op m_op;
  Graph m_graph;
  std::string m_label;
  std::map<int, std::vector<int32_t>> m_writes;
};

// ---- GEMM ---------------------------------------------------------------------------------
std::vector<OpSample> gemm(DType d) {
  std::vector<OpSample> out;
  struct Case {
    const char* name;
    int64_t batch, m, n, k;
    bool ta, tb, broadcast_b, accumulate;
  };
  for (const Case& c : {Case{"nn", 1, 16, 24, 32, false, false, false, false},
                        Case{"nt", 1, 24, 16, 40, false, true, false, false},
                        Case{"tn", 1, 8, 32, 16, true, false, false, false},
                        Case{"skinny", 1, 1, 64, 32, false, true, false, false},
                        Case{"batched, shared B", 3, 8, 16, 24, false, false, true, false},
                        Case{"accumulate", 1, 16, 16, 16, false, false, false, true}}) {
    Sample s(OpKind::gemm, d, c.name);
    const Shape a = c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k};
    const Shape b = c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n};
    auto batched = [&](Shape x) {
      if (c.batch > 1) x.insert(x.begin(), c.batch);
      return x;
    };
    s.in("A", batched(a));
    s.in("B", c.broadcast_b ? b : batched(b), TensorRole::weight);
    if (c.accumulate) s.in("C", batched({c.m, c.n}));
    s.out("C.out", batched({c.m, c.n}));
    OpAttrs& at = s.attrs();
    at.batch = c.batch, at.m = c.m, at.n = c.n, at.k = c.k;
    at.trans_a = c.ta, at.trans_b = c.tb, at.accumulate = c.accumulate;
    out.push_back(s.done());
  }
  return out;
}

// ---- attention ------------------------------------------------------------------------------
struct Attn {
  int64_t batch = 2, seq_q = 3, seq_kv = 5, heads = 4, kv_heads = 2, head_dim = 64;
  int64_t capacity = 0;  // K/V rows allocated (0: seq_kv)
  bool causal = true;
  [[nodiscard]] int64_t cap() const { return capacity > 0 ? capacity : seq_kv; }
  [[nodiscard]] Shape q() const { return {batch, seq_q, heads, head_dim}; }
  [[nodiscard]] Shape kv() const { return {batch, cap(), kv_heads, head_dim}; }
  [[nodiscard]] Shape scores() const { return {batch, heads, seq_q, seq_kv}; }
  [[nodiscard]] Shape lse() const { return {batch, heads, seq_q}; }
  void set(OpAttrs& at) const {
    at.batch = batch, at.seq_q = seq_q, at.seq_kv = seq_kv, at.heads = heads, at.kv_heads = kv_heads;
    at.head_dim = head_dim, at.causal = causal, at.kv_capacity = cap();
  }
};

std::vector<OpSample> materialized(OpKind k, DType d) {
  const Attn a{2, 3, 5, 4, 2, 16, 6, true};
  Sample s(k, d, "causal, GQA");
  switch (k) {
    case OpKind::attn_scores: s.in("Q", a.q()), s.in("K", a.kv()), s.out("S", a.scores()); break;
    case OpKind::attn_softmax: s.in("S", a.scores()), s.out("P", a.scores()); break;
    case OpKind::attn_context: s.in("P", a.scores()), s.in("V", a.kv()), s.out("O", a.q()); break;
    case OpKind::attn_context_bwd:
      s.in("dO", a.q()), s.in("P", a.scores()), s.in("V", a.kv()), s.out("dP", a.scores()), s.out("dV", a.kv());
      break;
    case OpKind::attn_softmax_bwd: s.in("P", a.scores()), s.in("dP", a.scores()), s.out("dS", a.scores()); break;
    case OpKind::attn_scores_bwd:
      s.in("dS", a.scores()), s.in("Q", a.q()), s.in("K", a.kv()), s.out("dQ", a.q()), s.out("dK", a.kv());
      break;
    default: return {};
  }
  a.set(s.attrs());
  if (k == OpKind::attn_softmax || k == OpKind::attn_softmax_bwd) s.attrs().kv_capacity = 0;  // no K/V read
  return {s.done()};
}

std::vector<OpSample> flash_attention(DType d) {
  std::vector<OpSample> out;
  // Dense K, V: a causal prefill, a decode over a longer cache, a non-causal block.
  for (const auto& [name, a] : {std::pair{"prefill", Attn{2, 9, 9, 4, 2, 64, 0, true}},
                                std::pair{"decode", Attn{2, 1, 13, 4, 2, 64, 16, true}},
                                std::pair{"non-causal", Attn{1, 5, 7, 2, 2, 128, 0, false}}}) {
    Sample s(OpKind::flash_attention, d, name);
    s.in("Q", a.q()), s.in("K", a.kv()), s.in("V", a.kv());
    s.out("O", a.q()), s.out("LSE", a.lse());
    a.set(s.attrs());
    out.push_back(s.done());
  }
  {  // K, V in pages: a decode of two sequences over 4 pages of 4 rows each (the table filled
     // as a permutation of the pool).
    const Attn a{2, 1, 11, 4, 2, 64, 16, true};
    Sample s(OpKind::paged_flash_attention, d, "decode");
    s.in("Q", a.q()), s.in("K.pages", {8, 4, 2, 64}, TensorRole::kv_cache), s.in("V.pages", {8, 4, 2, 64}, TensorRole::kv_cache);
    s.in("block_table", {2, 4});
    s.out("O", a.q()), s.out("LSE", a.lse());
    a.set(s.attrs());
    s.attrs().kv_block = 4;
    out.push_back(s.done());
  }
  {  // A serving step of three sequences packed: a decode (1 query over 5 keys), a prefill (3
     // over 3), a chunk (2 over 6).
    Sample s(OpKind::varlen_flash_attention, d, "three sequences");
    s.in("Q", {6, 4, 64}), s.in("K.pages", {6, 4, 2, 64}, TensorRole::kv_cache), s.in("V.pages", {6, 4, 2, 64}, TensorRole::kv_cache);
    s.write(s.in("block_table", {3, 2}), {4, 1, 0, 5, 3, 2});
    s.write(s.in("query_start", {4}), {0, 1, 4, 6});
    s.write(s.in("kv_len", {3}), {5, 3, 6});
    s.out("O", {6, 4, 64}), s.out("LSE", {4, 6});
    OpAttrs& at = s.attrs();
    at.kv_block = 4, at.batch = 3, at.rows = 6, at.seq_q = 3, at.seq_kv = 6;
    at.heads = 4, at.kv_heads = 2, at.head_dim = 64, at.decode_seqs = 1, at.causal = true;
    at.kv_pairs = 5 + (1 + 2 + 3) + (5 + 6);
    at.cols = 5 + 3 + 6;
    out.push_back(s.done());
  }
  return out;
}

std::vector<OpSample> flash_attention_bwd(DType d) {
  std::vector<OpSample> out;
  for (const auto& [name, a] : {std::pair{"causal", Attn{2, 9, 9, 4, 2, 64, 0, true}},
                                std::pair{"non-causal", Attn{1, 5, 7, 2, 1, 128, 0, false}}}) {
    Sample s(OpKind::flash_attention_bwd, d, name);
    s.in("Q", a.q()), s.in("K", a.kv()), s.in("V", a.kv()), s.in("O", a.q()), s.in("dO", a.q()), s.in("LSE", a.lse());
    s.out("dQ", a.q()), s.out("dK", a.kv()), s.out("dV", a.kv());
    a.set(s.attrs());
    out.push_back(s.done());
  }
  return out;
}

std::vector<OpSample> attn_merge(DType d) {
  const Attn a{2, 3, 3, 4, 4, 64, 0, false};
  Sample s(OpKind::attn_merge, d, "two blocks");
  s.in("O.a", a.q()), s.in("LSE.a", a.lse()), s.in("O.b", a.q()), s.in("LSE.b", a.lse());
  s.out("O", a.q()), s.out("LSE", a.lse());
  a.set(s.attrs());
  return {s.done()};
}

// ---- norms and loss -------------------------------------------------------------------------
std::vector<OpSample> rows_cols(OpKind k, DType d) {
  std::vector<OpSample> out;
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{6, 40}, {3, 256}}) {
    Sample s(k, d, fmt::format("{}x{}", rows, cols));
    const Shape x{rows, cols}, c{cols}, r{rows};
    switch (k) {
      case OpKind::layernorm: s.in("x", x), s.in("gamma", c), s.in("beta", c), s.out("y", x); break;
      case OpKind::layernorm_bwd:
        s.in("x", x), s.in("gamma", c), s.in("dy", x), s.out("dx", x), s.out("dgamma", c), s.out("dbeta", c);
        break;
      case OpKind::rmsnorm: s.in("x", x), s.in("gamma", c), s.out("y", x); break;
      case OpKind::rmsnorm_bwd: s.in("x", x), s.in("gamma", c), s.in("dy", x), s.out("dx", x), s.out("dgamma", c); break;
      case OpKind::add_rmsnorm: s.in("a", x), s.in("b", x), s.in("gamma", c), s.out("sum", x), s.out("y", x); break;
      case OpKind::add_layernorm:
        s.in("a", x), s.in("b", x), s.in("gamma", c), s.in("beta", c), s.out("sum", x), s.out("y", x);
        break;
      case OpKind::cross_entropy: s.in("logits", x), s.in("targets", r), s.out("loss", r), s.out("dlogits", x); break;
      case OpKind::batchnorm:
        s.in("x", x), s.in("gamma", c), s.in("beta", c), s.out("y", x), s.out("mean", c), s.out("rstd", c);
        break;
      case OpKind::batchnorm_infer:
        // Running statistics are persistent buffers (ones at initialization: a positive variance).
        s.in("x", x), s.in("gamma", c), s.in("beta", c), s.in("running_mean", c, TensorRole::weight),
            s.in("running_var", c, TensorRole::weight), s.out("y", x);
        break;
      case OpKind::batchnorm_bwd:
        s.in("x", x), s.in("gamma", c), s.in("mean", c), s.in("rstd", c), s.in("dy", x), s.out("dx", x),
            s.out("dgamma", c), s.out("dbeta", c);
        break;
      default: return {};
    }
    s.attrs().rows = rows, s.attrs().cols = cols;
    out.push_back(s.done());
  }
  if (k == OpKind::cross_entropy) {  // the forward alone (no gradient written)
    Sample s(k, d, "loss only");
    s.in("logits", {5, 33}), s.in("targets", {5}), s.out("loss", {5});
    s.attrs().rows = 5, s.attrs().cols = 33;
    out.push_back(s.done());
  }
  return out;
}

// ---- pointwise ------------------------------------------------------------------------------
std::vector<OpSample> pointwise(OpKind k, DType d) {
  std::vector<OpSample> out;
  for (int64_t n : {int64_t{7}, int64_t{1000}}) {
    Sample s(k, d, fmt::format("{} elements", n));
    const Shape x{n};
    switch (k) {
      case OpKind::gelu: s.in("x", x), s.out("y", x); break;
      case OpKind::gelu_bwd: s.in("x", x), s.in("dy", x), s.out("dx", x); break;
      case OpKind::silu_mul: s.in("gate", x), s.in("up", x), s.out("y", x); break;
      case OpKind::silu_mul_bwd: s.in("gate", x), s.in("up", x), s.in("dy", x), s.out("dgate", x), s.out("dup", x); break;
      case OpKind::residual_add: s.in("a", x), s.in("b", x), s.out("out", x); break;
      case OpKind::relu: s.in("x", x), s.out("y", x); break;
      case OpKind::relu_bwd: s.in("y", x), s.in("dy", x), s.out("dx", x); break;
      default: return {};
    }
    s.attrs().elements = n;
    out.push_back(s.done());
  }
  return out;
}

// ---- convolutions and pools (NHWC) ------------------------------------------------------------
std::vector<OpSample> conv(OpKind k, DType d) {
  struct Case {
    const char* name;
    ConvGeometry c;
    int64_t batch;
  };
  const bool pool = class_of(k) != OpClass::conv;
  std::vector<Case> cases;
  if (pool) {
    cases = {{"3x3/2 pad 1", {9, 7, 5, 5, 3, 3, 2, 1, 1, 1}, 2}, {"global", {4, 5, 6, 6, 4, 5, 1, 0, 1, 1}, 3}};
  } else {
    cases = {{"3x3 pad 1", {7, 6, 5, 8, 3, 3, 1, 1, 1, 1}, 2},
             {"folded bias and relu", {7, 6, 5, 8, 3, 3, 1, 1, 1, 1}, 2},
             {"7x7/2 pad 3", {11, 9, 3, 6, 7, 7, 2, 3, 1, 1}, 1},
             {"1x1/2", {6, 6, 8, 12, 1, 1, 2, 0, 1, 1}, 2},
             {"grouped 3x3, dilation 2", {8, 8, 6, 9, 3, 3, 1, 2, 2, 3}, 2}};
  }
  std::vector<OpSample> out;
  for (const Case& c : cases) {
    Sample s(k, d, c.name);
    const Shape x{c.batch, c.c.height, c.c.width, c.c.channels};
    const Shape y{c.batch, c.c.out_h(), c.c.out_w(), c.c.filters};
    const Shape w{c.c.filters, c.c.kernel_h, c.c.kernel_w, c.c.channels / c.c.groups};
    switch (k) {
      case OpKind::conv2d:
        s.in("x", x), s.in("w", w, TensorRole::weight);
        if (std::string(c.name) == "folded bias and relu") s.in("bias", {c.c.filters}), s.attrs().conv_relu = true;
        s.out("y", y);
        break;
      case OpKind::conv2d_dgrad: s.in("dy", y), s.in("w", w, TensorRole::weight), s.out("dx", x); break;
      case OpKind::conv2d_wgrad: s.in("x", x), s.in("dy", y), s.out("dw", w); break;
      case OpKind::maxpool:
      case OpKind::avgpool: s.in("x", x), s.out("y", y); break;
      case OpKind::maxpool_bwd: s.in("x", x), s.in("dy", y), s.out("dx", x); break;
      case OpKind::avgpool_bwd: s.in("dy", y), s.out("dx", x); break;
      default: return {};
    }
    s.attrs().batch = c.batch;
    s.attrs().conv = c.c;
    out.push_back(s.done());
  }
  return out;
}

std::vector<OpSample> rope(OpKind k, DType d) {
  if (k == OpKind::varlen_rope) {  // each token at its own position
    Sample s(k, d, "positions");
    s.in("x", {6, 4, 16});
    s.write(s.in("positions", {6}), {0, 1, 2, 7, 8, 3});
    s.out("y", {6, 4, 16});
    s.attrs().heads = 4, s.attrs().head_dim = 16;
    return {s.done()};
  }
  Sample s(k, d, "two sequences of 3 from position 2");
  s.in(k == OpKind::rope ? "x" : "dy", {6, 4, 16});
  s.out(k == OpKind::rope ? "y" : "dx", {6, 4, 16});
  s.attrs().heads = 4, s.attrs().head_dim = 16, s.attrs().seq_q = 3, s.attrs().position = 2;
  return {s.done()};
}

// ---- embedding ------------------------------------------------------------------------------
std::vector<OpSample> embedding(OpKind k, DType d) {
  std::vector<OpSample> out;
  for (bool positions : {true, false}) {
    for (bool accumulate : {false, true}) {
      if (k == OpKind::embedding && accumulate) continue;
      Sample s(k, d, fmt::format("{}{}", positions ? "learned positions" : "no positions",
                                 accumulate ? ", accumulating" : ""));
      s.in("ids", {6});
      if (k == OpKind::embedding) {
        s.in("table", {20, 16}, TensorRole::weight);
        if (positions) s.in("positions", {8, 16}, TensorRole::weight);
        s.out("x", {6, 16});
      } else {
        s.in("dx", {6, 16});
        if (accumulate) {
          s.in("dtable.in", {20, 16});
          if (positions) s.in("dpositions.in", {8, 16});
        }
        s.out("dtable", {20, 16});
        if (positions) s.out("dpositions", {8, 16});
      }
      s.attrs().seq_q = 3, s.attrs().position = 1, s.attrs().accumulate = accumulate;
      out.push_back(s.done());
    }
  }
  return out;
}

// ---- optimizer ------------------------------------------------------------------------------
std::vector<OpSample> adamw(DType d) {
  std::vector<OpSample> out;
  for (int passes : {1, 4}) {
    Sample s(OpKind::adamw, d, fmt::format("{}", passes == 1 ? "fused" : "four passes"));
    const bool master = d != DType::fp32;  // low precision: an fp32 master and its copy
    for (int group = 0; group < 2; ++group) {
      const Shape shape = group == 0 ? Shape{10, 12} : Shape{37};
      const std::string p = fmt::format("p{}", group);
      s.in_as(p, shape, DType::fp32, master ? TensorRole::master_weight : TensorRole::weight);
      s.in(p + ".grad", shape);
      s.in_as(p + ".m", shape, DType::fp32, TensorRole::optimizer_state);
      s.in_as(p + ".v", shape, DType::fp32, TensorRole::optimizer_state);
      if (master) s.in(p + ".weight", shape, TensorRole::weight);
    }
    // Outputs: {param, m, v} (+ weight) per group, all as their inputs.
    for (int group = 0; group < 2; ++group) {
      const Shape shape = group == 0 ? Shape{10, 12} : Shape{37};
      const std::string p = fmt::format("p{}", group);
      for (const char* what : {".out", ".m.out", ".v.out"}) {
        const int id = s.out(p + what, shape);
        s.tensor(id).dtype = DType::fp32;
      }
      if (master) s.out(p + ".weight.out", shape);
    }
    s.attrs().passes = passes, s.attrs().lr = 1e-2;
    out.push_back(s.done());
  }
  return out;
}

// ---- KV cache and slicing -------------------------------------------------------------------
std::vector<OpSample> kv_append(DType d) {
  std::vector<OpSample> out;
  {
    Sample s(OpKind::kv_append, d, "rows 4..6 of 8");
    s.in("k_new", {2, 3, 2, 16}), s.in("cache", {2, 8, 2, 16}, TensorRole::kv_cache), s.out("cache.out", {2, 8, 2, 16});
    OpAttrs& at = s.attrs();
    at.batch = 2, at.seq_q = 3, at.kv_heads = 2, at.head_dim = 16, at.position = 4, at.kv_capacity = 8;
    out.push_back(s.done());
  }
  {
    Sample s(OpKind::paged_kv_append, d, "row 5");
    s.in("k_new", {2, 1, 2, 16}), s.in("pages", {8, 4, 2, 16}, TensorRole::kv_cache), s.in("block_table", {2, 4});
    s.out("pages.out", {8, 4, 2, 16});
    OpAttrs& at = s.attrs();
    at.batch = 2, at.seq_q = 1, at.kv_heads = 2, at.head_dim = 16, at.position = 5, at.kv_block = 4, at.kv_capacity = 16;
    out.push_back(s.done());
  }
  {
    Sample s(OpKind::varlen_kv_append, d, "slots");
    s.in("k_new", {6, 2, 16}), s.in("pages", {6, 4, 2, 16}, TensorRole::kv_cache);
    s.write(s.in("slots", {6}), {3, 9, 10, 11, -1, 20});
    s.out("pages.out", {6, 4, 2, 16});
    OpAttrs& at = s.attrs();
    at.kv_block = 4, at.rows = 6, at.kv_heads = 2, at.head_dim = 16;
    out.push_back(s.done());
  }
  return out;
}

std::vector<OpSample> slice_last_token(DType d) {
  std::vector<OpSample> out;
  {
    Sample s(OpKind::slice_last_token, d, "two sequences of 3");
    s.in("x", {6, 16}), s.out("y", {2, 16});
    s.attrs().cols = 16, s.attrs().seq_q = 3, s.attrs().batch = 2;
    out.push_back(s.done());
  }
  {
    Sample s(OpKind::varlen_slice_last_token, d, "rows");
    s.in("x", {6, 16});
    s.write(s.in("rows", {3}), {0, 3, 5});
    s.out("y", {3, 16});
    s.attrs().cols = 16, s.attrs().batch = 3;
    out.push_back(s.done());
  }
  return out;
}

// ---- mixture of experts ---------------------------------------------------------------------
// 6 tokens to 2 of 4 experts, buffers of 4 rows of 16 features; the routing inputs are filled
// round robin (tensor_init.hpp), each buffer row once.
std::vector<OpSample> moe(OpKind k, DType d) {
  constexpr int64_t t = 6, e = 4, top = 2, c = 4, h = 16;
  Sample s(k, d, "6 tokens, top-2 of 4");
  const Shape logits{t, e}, routing{t, top}, rows{t, h}, buffers{e, c, h};
  switch (k) {
    case OpKind::moe_route: s.in("logits", logits), s.out("weights", routing), s.out("experts", routing), s.out("slots", routing); break;
    case OpKind::moe_route_bwd:
      s.in("logits", logits), s.in("experts", routing), s.in("dweights", routing), s.out("dlogits", logits);
      break;
    case OpKind::moe_dispatch: s.in("x", rows), s.in("experts", routing), s.in("slots", routing), s.out("xe", buffers); break;
    case OpKind::moe_dispatch_bwd:
      s.in("dxe", buffers), s.in("experts", routing), s.in("slots", routing), s.out("dx", rows);
      break;
    case OpKind::moe_combine:
      s.in("ye", buffers), s.in("experts", routing), s.in("slots", routing), s.in("weights", routing), s.out("y", rows);
      break;
    case OpKind::moe_combine_bwd:
      s.in("dy", rows), s.in("ye", buffers), s.in("experts", routing), s.in("slots", routing), s.in("weights", routing);
      s.out("dye", buffers), s.out("dweights", routing);
      break;
    default: return {};
  }
  OpAttrs& at = s.attrs();
  at.rows = t, at.experts = e, at.top_k = top, at.capacity = c;
  at.cols = k == OpKind::moe_route || k == OpKind::moe_route_bwd ? e : h;
  return {s.done()};
}

// ---- copies ---------------------------------------------------------------------------------
std::vector<OpSample> copy(DType d) {
  std::vector<OpSample> out;
  {
    Sample s(OpKind::copy, d, "device to device");
    s.in("x", {129}), s.out("y", {129});
    out.push_back(s.done());
  }
  {
    Sample s(OpKind::copy, d, "from fp32");
    s.in_as("x", {129}, DType::fp32), s.out("y", {129});
    out.push_back(s.done());
  }
  {
    Sample s(OpKind::copy, d, "upload from pinned memory");
    const int x = s.in("x.host", {129});
    s.tensor(x).residence = Residence::host_pinned;
    s.out("x", {129});
    out.push_back(s.done());
  }
  return out;
}

// The samples of k's family (the functions above build a family's kinds together).
std::vector<OpSample> family_samples(OpKind k, DType d) {
  switch (k) {
    case OpKind::gemm: return gemm(d);
    case OpKind::attn_scores:
    case OpKind::attn_softmax:
    case OpKind::attn_context:
    case OpKind::attn_context_bwd:
    case OpKind::attn_softmax_bwd:
    case OpKind::attn_scores_bwd: return materialized(k, d);
    case OpKind::flash_attention:
    case OpKind::paged_flash_attention:
    case OpKind::varlen_flash_attention: return flash_attention(d);
    case OpKind::flash_attention_bwd: return flash_attention_bwd(d);
    case OpKind::attn_merge: return attn_merge(d);
    case OpKind::layernorm:
    case OpKind::layernorm_bwd:
    case OpKind::rmsnorm:
    case OpKind::rmsnorm_bwd:
    case OpKind::add_rmsnorm:
    case OpKind::add_layernorm:
    case OpKind::cross_entropy:
    case OpKind::batchnorm:
    case OpKind::batchnorm_infer:
    case OpKind::batchnorm_bwd: return rows_cols(k, d);
    case OpKind::conv2d:
    case OpKind::conv2d_dgrad:
    case OpKind::conv2d_wgrad:
    case OpKind::maxpool:
    case OpKind::maxpool_bwd:
    case OpKind::avgpool:
    case OpKind::avgpool_bwd: return conv(k, d);
    case OpKind::relu:
    case OpKind::relu_bwd:
    case OpKind::gelu:
    case OpKind::gelu_bwd:
    case OpKind::silu_mul:
    case OpKind::silu_mul_bwd:
    case OpKind::residual_add: return pointwise(k, d);
    case OpKind::rope:
    case OpKind::varlen_rope:
    case OpKind::rope_bwd: return rope(k, d);
    case OpKind::embedding:
    case OpKind::embedding_bwd: return embedding(k, d);
    case OpKind::adamw: return adamw(d);
    case OpKind::kv_append:
    case OpKind::paged_kv_append:
    case OpKind::varlen_kv_append: return kv_append(d);
    case OpKind::slice_last_token:
    case OpKind::varlen_slice_last_token: return slice_last_token(d);
    case OpKind::moe_route:
    case OpKind::moe_route_bwd:
    case OpKind::moe_dispatch:
    case OpKind::moe_dispatch_bwd:
    case OpKind::moe_combine:
    case OpKind::moe_combine_bwd: return moe(k, d);
    case OpKind::copy: return copy(d);
    case OpKind::collective:
    case OpKind::host: return {};
  }
  return {};
}

}  // namespace

bool is_sampled(OpKind k) { return k != OpKind::collective && k != OpKind::host; }

std::vector<OpSample> op_samples(OpKind k, DType d) {
  std::vector<OpSample> out;
  for (OpSample& s : family_samples(k, d))
    if (s.op().kind == k) out.push_back(std::move(s));
  return out;
}

std::vector<int> sample_outputs(const OpSample& s) { return s.op().outputs; }

}  // namespace perfsim::test
