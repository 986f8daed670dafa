// Derivation and checking of kernel shapes from ops (see op_shapes.hpp).
#include "backends/ops/op_shapes.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"

namespace perfsim::ops {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& what) {
  throw NotExecutable(fmt::format("op '{}' ({}): {}", op.name, name_of(op.kind), what));
}

const Tensor& input(const Op& op, const Graph& g, std::size_t i) { return g.tensor(op.inputs.at(i)); }
const Tensor& output(const Op& op, const Graph& g, std::size_t i) { return g.tensor(op.outputs.at(i)); }

void expect_elements(const Op& op, const Tensor& t, int64_t expected, const char* layout) {
  if (t.elements() != expected)
    fail(op, fmt::format("tensor '{}' holds {} elements but the op's attributes describe {} ({})",
                         t.name, t.elements(), expected, layout));
}

void expect_positive(const Op& op, int64_t v, const char* attr) {
  if (v <= 0) fail(op, fmt::format("attribute {} must be positive (is {})", attr, v));
}

// Rows of a [batch, rows, heads, head_dim] tensor, or fails when it does not divide evenly.
int64_t rows_of(const Op& op, const Tensor& t, int64_t batch, int64_t heads, int64_t head_dim,
                const char* layout) {
  const int64_t per_row = batch * heads * head_dim;
  if (t.elements() % per_row != 0)
    fail(op, fmt::format("tensor '{}' holds {} elements, not a multiple of {} ({})", t.name,
                         t.elements(), per_row, layout));
  return t.elements() / per_row;
}

// What each operand of an attention op is.
enum class AttnOperand { q, kv, scores, lse, grad_kv };

struct AttnOperands {
  std::vector<AttnOperand> in, out;
};

AttnOperands attn_operands(OpKind k) {
  using A = AttnOperand;
  switch (k) {
    case OpKind::attn_scores: return {{A::q, A::kv}, {A::scores}};
    case OpKind::attn_softmax: return {{A::scores}, {A::scores}};
    case OpKind::attn_context: return {{A::scores, A::kv}, {A::q}};
    case OpKind::attn_context_bwd: return {{A::q, A::scores, A::kv}, {A::scores, A::grad_kv}};
    case OpKind::attn_softmax_bwd: return {{A::scores, A::scores}, {A::scores}};
    case OpKind::attn_scores_bwd: return {{A::scores, A::q, A::kv}, {A::q, A::grad_kv}};
    case OpKind::flash_attention:
    case OpKind::paged_flash_attention: return {{A::q, A::kv, A::kv}, {A::q, A::lse}};  // + the table
    case OpKind::flash_attention_bwd:
      return {{A::q, A::kv, A::kv, A::q, A::q, A::lse}, {A::q, A::grad_kv, A::grad_kv}};
    case OpKind::attn_merge: return {{A::q, A::lse, A::q, A::lse}, {A::q, A::lse}};
    default: return {};
  }
}

void expect_int32(const Op& op, const Tensor& t, const char* what) {
  if (t.dtype != DType::int32) fail(op, fmt::format("{} '{}' must be int32", what, t.name));
}

}  // namespace

void check_arity(const Op& op) {
  // The kind's signature (core/graph/op_kind.cpp); a variadic one takes any number more.
  const OpSignature& sig = signature_of(op.kind);
  constexpr std::size_t any = std::size_t{1} << 30;
  const std::size_t in_max = sig.variadic ? any : sig.inputs.size();
  const std::size_t out_max = sig.variadic ? any : sig.outputs.size();
  const std::size_t ni = op.inputs.size(), no = op.outputs.size();
  if (ni < sig.min_inputs() || ni > in_max || no < sig.min_outputs() || no > out_max)
    fail(op, fmt::format("has {} inputs and {} outputs; the kind takes {}..{} inputs and {}..{} "
                         "outputs ({})",
                         ni, no, sig.min_inputs(), in_max, sig.min_outputs(), out_max, signature_text(op.kind)));
}

std::vector<InPlace> in_place_operands(const Op& op) {
  // The cache or pages appended to: input 1 of every append.
  if (op.kind == OpKind::kv_append || op.kind == OpKind::paged_kv_append || op.kind == OpKind::varlen_kv_append)
    return {{1, 0}};
  std::vector<InPlace> out;
  if (op.kind == OpKind::embedding_bwd && op.attrs.accumulate)
    for (std::size_t j = 0; j < op.outputs.size() && 2 + j < op.inputs.size(); ++j) out.push_back({2 + j, j});
  return out;
}

GemmIds gemm_ids(const Op& op) {
  check_arity(op);
  return {op.inputs[0], op.inputs[1], op.inputs.size() > 2 ? op.inputs[2] : -1, op.outputs[0]};
}

CopyIds copy_ids(const Op& op) {
  check_arity(op);
  return {op.inputs[0], op.outputs[0]};
}

GemmShape gemm_shape(const Op& op, const Graph& g) {
  const OpAttrs& at = op.attrs;
  expect_positive(op, at.m, "m");
  expect_positive(op, at.n, "n");
  expect_positive(op, at.k, "k");
  GemmShape s;
  s.batch = std::max<int64_t>(1, at.batch);
  s.m = at.m, s.n = at.n, s.k = at.k;
  s.trans_a = at.trans_a, s.trans_b = at.trans_b;
  s.accumulate = at.accumulate;
  const Tensor& a = input(op, g, 0);
  const Tensor& b = input(op, g, 1);
  s.broadcast_a = s.batch > 1 && a.elements() == s.m * s.k;
  s.broadcast_b = s.batch > 1 && b.elements() == s.k * s.n;
  expect_elements(op, a, (s.broadcast_a ? 1 : s.batch) * s.m * s.k, "A: [batch, m, k]");
  expect_elements(op, b, (s.broadcast_b ? 1 : s.batch) * s.k * s.n, "B: [batch, k, n]");
  expect_elements(op, output(op, g, 0), s.batch * s.m * s.n, "C: [batch, m, n]");
  if (s.accumulate && op.inputs.size() != 3)
    fail(op, "an accumulating gemm reads C: its inputs must be {A, B, C}");
  if (op.inputs.size() == 3) expect_elements(op, input(op, g, 2), s.batch * s.m * s.n, "C: [batch, m, n]");
  return s;
}

// The storage of a cache tensor `t` an op reads or writes: fp8 e4m3 with the op's scale, or
// the op's own float type.
KvStorage kv_storage(const Op& op, const Tensor& t) {
  KvStorage k;
  if (t.dtype != DType::fp8) return k;
  if (!(op.attrs.kv_scale > 0)) fail(op, fmt::format("an fp8 KV cache needs kv_scale > 0 (got {})", op.attrs.kv_scale));
  k.fp8 = true;
  k.scale = static_cast<float>(op.attrs.kv_scale);
  return k;
}

AttnShape attn_shape(const Op& op, const Graph& g) {
  const OpAttrs& at = op.attrs;
  if (op.kind == OpKind::varlen_flash_attention) fail(op, "is varlen: its shapes are varlen_attn_shape's");
  AttnShape a;
  a.batch = std::max<int64_t>(1, at.batch);
  a.seq_q = at.seq_q, a.seq_kv = at.seq_kv;
  a.heads = at.heads;
  a.kv_heads = at.kv_heads > 0 ? at.kv_heads : at.heads;
  a.head_dim = at.head_dim;
  a.causal = at.causal;
  a.alibi_heads = at.alibi_heads;
  expect_positive(op, a.seq_q, "seq_q");
  expect_positive(op, a.seq_kv, "seq_kv");
  expect_positive(op, a.heads, "heads");
  expect_positive(op, a.head_dim, "head_dim");
  if (a.heads % a.kv_heads != 0)
    fail(op, fmt::format("heads ({}) is not a multiple of kv_heads ({})", a.heads, a.kv_heads));
  const AttnOperands ops = attn_operands(op.kind);
  const bool paged = op.kind == OpKind::paged_flash_attention;
  if (op.inputs.size() != ops.in.size() + (paged ? 1 : 0))
    fail(op, fmt::format("takes {} inputs, has {}", ops.in.size() + (paged ? 1 : 0), op.inputs.size()));
  // Capacities come from the tensors themselves: a KV cache is longer than the valid rows.
  // A paged cache's logical capacity is its table's pages per sequence.
  a.kv_capacity = a.seq_kv;
  a.grad_capacity = a.seq_kv;
  int64_t kv_elements = 0;  // a paged K/V tensor: the whole pool
  if (paged) {
    a.paged = paged_layout(op, g, a.batch);
    a.kv_capacity = a.paged.block * a.paged.max_blocks;
    kv_elements = a.paged.num_blocks * a.paged.block * a.kv_heads * a.head_dim;
  }
  for (std::size_t i = 0; i < ops.in.size() && !paged; ++i)
    if (ops.in[i] == AttnOperand::kv) {
      a.kv_capacity = rows_of(op, input(op, g, i), a.batch, a.kv_heads, a.head_dim,
                              "K/V: [batch, kv_capacity, kv_heads, head_dim]");
      break;
    }
  for (std::size_t i = 0; i < ops.out.size(); ++i)
    if (ops.out[i] == AttnOperand::grad_kv) {
      a.grad_capacity = rows_of(op, output(op, g, i), a.batch, a.kv_heads, a.head_dim,
                                "dK/dV: [batch, rows, kv_heads, head_dim]");
      break;
    }
  if (a.kv_capacity < a.seq_kv || a.grad_capacity < a.seq_kv)
    fail(op, fmt::format("K/V hold {} rows and their gradients {}, fewer than seq_kv = {}",
                         a.kv_capacity, a.grad_capacity, a.seq_kv));
  if (at.kv_capacity > 0 && at.kv_capacity != a.kv_capacity)
    fail(op, fmt::format("attribute kv_capacity = {} but K/V hold {} rows", at.kv_capacity, a.kv_capacity));
  auto check = [&](const Tensor& t, AttnOperand what) {
    switch (what) {
      case AttnOperand::q:
        expect_elements(op, t, a.batch * a.seq_q * a.heads * a.head_dim, "[batch, seq_q, heads, head_dim]");
        break;
      case AttnOperand::kv:
        if (paged) expect_elements(op, t, kv_elements, "pages: [num_blocks, kv_block, kv_heads, head_dim]");
        else expect_elements(op, t, a.batch * a.kv_capacity * a.kv_heads * a.head_dim,
                             "[batch, kv_capacity, kv_heads, head_dim]");
        break;
      case AttnOperand::grad_kv:
        expect_elements(op, t, a.batch * a.grad_capacity * a.kv_heads * a.head_dim,
                        "[batch, rows, kv_heads, head_dim]");
        break;
      case AttnOperand::scores:
        expect_elements(op, t, a.batch * a.heads * a.seq_q * a.seq_kv, "[batch, heads, seq_q, seq_kv]");
        break;
      case AttnOperand::lse:
        expect_elements(op, t, a.batch * a.heads * a.seq_q, "LSE: [batch, heads, seq_q]");
        break;
    }
  };
  for (std::size_t i = 0; i < ops.in.size(); ++i) check(input(op, g, i), ops.in[i]);
  for (std::size_t i = 0; i < ops.out.size(); ++i) check(output(op, g, i), ops.out[i]);
  for (std::size_t i = 0; i < ops.in.size(); ++i)
    if (ops.in[i] == AttnOperand::kv) {
      a.kv = kv_storage(op, input(op, g, i));
      break;
    }
  return a;
}

RowsCols row_shape(const Op& op, const Graph& g) {
  const Tensor& x = input(op, g, 0);
  RowsCols rc{op.attrs.rows, op.attrs.cols};
  if (rc.cols <= 0) rc.cols = x.shape.empty() ? 1 : x.shape.back();
  if (rc.rows <= 0) rc.rows = x.elements() / std::max<int64_t>(rc.cols, 1);
  // Per operand: 'x' = [rows, cols], 'c' = [cols] (gamma, beta), 'r' = [rows] (targets, loss).
  const char* in_layout = "";
  const char* out_layout = "";
  switch (op.kind) {
    case OpKind::layernorm: in_layout = "xcc", out_layout = "x"; break;
    case OpKind::layernorm_bwd: in_layout = "xcx", out_layout = "xcc"; break;
    case OpKind::rmsnorm: in_layout = "xc", out_layout = "x"; break;
    case OpKind::rmsnorm_bwd: in_layout = "xcx", out_layout = "xc"; break;
    case OpKind::add_rmsnorm: in_layout = "xxc", out_layout = "xx"; break;
    case OpKind::add_layernorm: in_layout = "xxcc", out_layout = "xx"; break;
    case OpKind::cross_entropy: in_layout = "xr", out_layout = "rx"; break;
    case OpKind::batchnorm: in_layout = "xcc", out_layout = "xcc"; break;
    case OpKind::batchnorm_infer: in_layout = "xcccc", out_layout = "x"; break;
    case OpKind::batchnorm_bwd: in_layout = "xcccx", out_layout = "xcc"; break;
    default: break;
  }
  auto check = [&](const Tensor& t, char what) {
    if (what == 'x') expect_elements(op, t, rc.rows * rc.cols, "[rows, cols]");
    if (what == 'c') expect_elements(op, t, rc.cols, "[cols]");
    if (what == 'r') expect_elements(op, t, rc.rows, "[rows]");
  };
  for (std::size_t i = 0; i < op.inputs.size() && in_layout[i] != 0; ++i) check(input(op, g, i), in_layout[i]);
  for (std::size_t i = 0; i < op.outputs.size() && out_layout[i] != 0; ++i) check(output(op, g, i), out_layout[i]);
  return rc;
}

int64_t elementwise_count(const Op& op, const Graph& g) {
  const int64_t n = output(op, g, 0).elements();
  for (int id : op.inputs) expect_elements(op, g.tensor(id), n, "elementwise");
  for (int id : op.outputs) expect_elements(op, g.tensor(id), n, "elementwise");
  return n;
}

ConvShape conv_shape(const Op& op, const Graph& g) {
  const OpAttrs& at = op.attrs;
  const ConvGeometry& c = at.conv;
  ConvShape s;
  s.batch = std::max<int64_t>(1, at.batch);
  s.height = c.height, s.width = c.width, s.channels = c.channels, s.filters = c.filters;
  s.kernel_h = c.kernel_h, s.kernel_w = c.kernel_w, s.stride = c.stride, s.pad = c.pad;
  s.dilation = c.dilation, s.groups = c.groups;
  s.relu = at.conv_relu;
  if (s.relu && op.kind != OpKind::conv2d) fail(op, "conv_relu applies to conv2d only");
  expect_positive(op, s.height, "conv.height");
  expect_positive(op, s.width, "conv.width");
  expect_positive(op, s.channels, "conv.channels");
  expect_positive(op, s.filters, "conv.filters");
  expect_positive(op, s.kernel_h, "conv.kernel_h");
  expect_positive(op, s.kernel_w, "conv.kernel_w");
  expect_positive(op, s.stride, "conv.stride");
  expect_positive(op, s.dilation, "conv.dilation");
  expect_positive(op, s.groups, "conv.groups");
  if (s.pad < 0) fail(op, fmt::format("attribute conv.pad must be >= 0 (is {})", s.pad));
  if (s.channels % s.groups != 0 || s.filters % s.groups != 0)
    fail(op, fmt::format("channels ({}) and filters ({}) must be multiples of groups ({})", s.channels, s.filters,
                         s.groups));
  s.out_h = c.out_h(), s.out_w = c.out_w();
  if (s.out_h <= 0 || s.out_w <= 0)
    fail(op, fmt::format("a {}×{} window (dilation {}) does not fit a {}×{} image padded by {}", s.kernel_h,
                         s.kernel_w, s.dilation, s.height, s.width, s.pad));
  const bool pool = class_of(op.kind) != OpClass::conv;
  if (pool && (s.filters != s.channels || s.groups != 1))
    fail(op, fmt::format("a pool keeps its channels: filters ({}) must equal channels ({}), groups 1", s.filters,
                         s.channels));
  if (pool && 2 * s.pad > std::min(s.kernel_h, s.kernel_w))
    fail(op, fmt::format("a pool's padding ({}) may be at most half its window ({}×{})", s.pad, s.kernel_h,
                         s.kernel_w));
  const int64_t x = s.x_elements(), y = s.y_elements(), w = s.w_elements();
  auto expect = [&](const Tensor& t, int64_t n, const char* layout) { expect_elements(op, t, n, layout); };
  switch (op.kind) {
    case OpKind::conv2d:
      expect(input(op, g, 0), x, "x: [batch, height, width, channels]");
      expect(input(op, g, 1), w, "w: [filters, kernel_h, kernel_w, channels / groups]");
      expect(output(op, g, 0), y, "y: [batch, out_h, out_w, filters]");
      if (op.inputs.size() > 2) expect(input(op, g, 2), s.filters, "bias: [filters]");
      break;
    case OpKind::conv2d_dgrad:
      expect(input(op, g, 0), y, "dy: [batch, out_h, out_w, filters]");
      expect(input(op, g, 1), w, "w: [filters, kernel_h, kernel_w, channels / groups]");
      expect(output(op, g, 0), x, "dx: [batch, height, width, channels]");
      break;
    case OpKind::conv2d_wgrad:
      expect(input(op, g, 0), x, "x: [batch, height, width, channels]");
      expect(input(op, g, 1), y, "dy: [batch, out_h, out_w, filters]");
      expect(output(op, g, 0), w, "dw: [filters, kernel_h, kernel_w, channels / groups]");
      break;
    case OpKind::maxpool:
    case OpKind::avgpool:
      expect(input(op, g, 0), x, "x: [batch, height, width, channels]");
      expect(output(op, g, 0), y, "y: [batch, out_h, out_w, channels]");
      break;
    case OpKind::maxpool_bwd:
      expect(input(op, g, 0), x, "x: [batch, height, width, channels]");
      expect(input(op, g, 1), y, "dy: [batch, out_h, out_w, channels]");
      expect(output(op, g, 0), x, "dx: [batch, height, width, channels]");
      break;
    case OpKind::avgpool_bwd:
      expect(input(op, g, 0), y, "dy: [batch, out_h, out_w, channels]");
      expect(output(op, g, 0), x, "dx: [batch, height, width, channels]");
      break;
    default: fail(op, "is not a convolution or a pool");
  }
  return s;
}

RopeShape rope_shape(const Op& op, const Graph& g) {
  const Tensor& x = input(op, g, 0);
  RopeShape r;
  r.head_dim = op.attrs.head_dim;
  expect_positive(op, r.head_dim, "head_dim");
  if (op.attrs.heads > 0) {
    r.heads = op.attrs.heads;
  } else if (x.shape.size() >= 3 && x.shape.back() == r.head_dim) {
    r.heads = x.shape[x.shape.size() - 2];  // [.., heads, head_dim]
  } else {
    r.heads = (x.shape.empty() ? 1 : x.shape.back()) / r.head_dim;  // [tokens, heads·head_dim]
  }
  expect_positive(op, r.heads, "heads");
  r.tokens = x.elements() / (r.heads * r.head_dim);
  expect_elements(op, x, r.tokens * r.heads * r.head_dim, "[tokens, heads, head_dim]");
  expect_elements(op, output(op, g, 0), r.tokens * r.heads * r.head_dim, "[tokens, heads, head_dim]");
  if (op.kind == OpKind::varlen_rope) {
    // Each token's position comes from the positions tensor: seq and position take no part.
    if (op.inputs.size() != 2) fail(op, "varlen rope takes {x, positions}");
    const Tensor& positions = input(op, g, 1);
    expect_int32(op, positions, "positions");
    expect_elements(op, positions, r.tokens, "positions: [tokens]");
    r.seq = r.tokens;
    return r;
  }
  r.seq = op.attrs.seq_q > 0 ? op.attrs.seq_q : r.tokens;
  r.position = op.attrs.position;
  return r;
}

EmbeddingShape embedding_shape(const Op& op, const Graph& g) {
  const bool bwd = op.kind == OpKind::embedding_bwd;
  const Tensor& ids = input(op, g, 0);
  if (ids.dtype != DType::int32) fail(op, fmt::format("token ids '{}' must be int32", ids.name));
  const Tensor& table = bwd ? output(op, g, 0) : input(op, g, 1);
  const Tensor* positions = nullptr;
  if (!bwd && op.inputs.size() > 2) positions = &input(op, g, 2);
  if (bwd && op.outputs.size() > 1) positions = &output(op, g, 1);
  EmbeddingShape e;
  e.tokens = ids.elements();
  e.vocab = table.shape.empty() ? 0 : table.shape.front();
  expect_positive(op, e.vocab, "vocab (table rows)");
  e.hidden = table.elements() / e.vocab;
  expect_elements(op, table, e.vocab * e.hidden, "table: [vocab, hidden]");
  if (positions != nullptr) {
    e.max_positions = positions->shape.empty() ? 0 : positions->shape.front();
    expect_elements(op, *positions, e.max_positions * e.hidden, "positions: [max_seq, hidden]");
  }
  expect_elements(op, bwd ? input(op, g, 1) : output(op, g, 0), e.tokens * e.hidden, "x: [tokens, hidden]");
  e.seq = op.attrs.seq_q > 0 ? op.attrs.seq_q : e.tokens;
  e.position = op.attrs.position;
  e.accumulate = bwd && op.attrs.accumulate;
  if (bwd) {
    const std::size_t want = 2 + (e.accumulate ? op.outputs.size() : 0);
    if (op.inputs.size() != want)
      fail(op, fmt::format("takes {} inputs ({{ids, dx}}{}), has {}", want,
                           e.accumulate ? " plus the gradients it adds into" : "", op.inputs.size()));
  }
  return e;
}

PagedLayout paged_layout(const Op& op, const Graph& g, int64_t batch) {
  const bool attention = op.kind == OpKind::paged_flash_attention || op.kind == OpKind::varlen_flash_attention;
  const bool varlen = op.kind == OpKind::varlen_flash_attention;
  if (op.kind == OpKind::varlen_kv_append) fail(op, "writes through per-token slots, not a block table");
  if (!reads_kv_pages(op.kind)) fail(op, "reads no KV pages");
  if (op.attrs.kv_block <= 0) fail(op, "reads KV pages, but attribute kv_block is not positive");
  // The table is input 3 of attention (the last, or followed by a varlen op's query starts and
  // KV lengths) and input 2, the last, of kv_append.
  const std::size_t inputs = attention ? (varlen ? 6u : 4u) : 3u;
  const std::size_t table_at = attention ? 3u : 2u;
  if (op.inputs.size() != inputs)
    fail(op, fmt::format("reads a paged cache: it takes {} inputs, the block table input {}", inputs, table_at));
  const Tensor& table = input(op, g, table_at);
  const Tensor& pages = input(op, g, 1);
  if (table.dtype != DType::int32) fail(op, fmt::format("block table '{}' must be int32", table.name));
  PagedLayout p;
  p.block = op.attrs.kv_block;
  p.max_blocks = table.elements() / std::max<int64_t>(1, batch);
  expect_positive(op, p.max_blocks, "max_blocks (block table columns)");
  expect_elements(op, table, batch * p.max_blocks, "block table: [batch, max_blocks]");
  if (pages.shape.size() != 4 || pages.shape[1] != p.block)
    fail(op, fmt::format("pages '{}' must be [num_blocks, {}, kv_heads, head_dim]", pages.name, p.block));
  p.num_blocks = pages.shape[0];
  if (op.attrs.kv_capacity > 0 && op.attrs.kv_capacity != p.block * p.max_blocks)
    fail(op, fmt::format("attribute kv_capacity = {} but the block table spans {} rows", op.attrs.kv_capacity,
                         p.block * p.max_blocks));
  return p;
}

KvAppendShape kv_append_shape(const Op& op, const Graph& g) {
  if (op.kind == OpKind::varlen_kv_append) fail(op, "is varlen: its shapes are kv_slots_shape's");
  const Tensor& k_new = input(op, g, 0);
  const Tensor& cache = input(op, g, 1);
  KvAppendShape s;
  s.batch = std::max<int64_t>(1, op.attrs.batch);
  if (op.attrs.kv_heads > 0 && op.attrs.head_dim > 0)
    s.row = op.attrs.kv_heads * op.attrs.head_dim;
  else if (cache.shape.size() == 4)
    s.row = cache.shape[2] * cache.shape[3];
  expect_positive(op, s.row, "kv_heads·head_dim");
  if (op.kind == OpKind::paged_kv_append) {
    s.paged = paged_layout(op, g, s.batch);
    s.capacity = s.paged.block * s.paged.max_blocks;
    expect_elements(op, cache, s.paged.num_blocks * s.paged.block * s.row,
                    "pages: [num_blocks, kv_block, kv_heads, head_dim]");
  } else {
    if (op.inputs.size() != 2) fail(op, "takes {k_new, cache} (paged_kv_append reads a block table)");
    s.capacity = rows_of(op, cache, s.batch, 1, s.row, "cache: [batch, capacity, kv_heads, head_dim]");
  }
  s.seq_new = rows_of(op, k_new, s.batch, 1, s.row, "k_new: [batch, seq_q, kv_heads, head_dim]");
  s.position = op.attrs.position;
  if (op.attrs.kv_capacity > 0 && op.attrs.kv_capacity != s.capacity)
    fail(op, fmt::format("attribute kv_capacity = {} but the cache holds {} rows", op.attrs.kv_capacity, s.capacity));
  if (s.position < 0 || s.position + s.seq_new > s.capacity)
    fail(op, fmt::format("rows {}..{} do not fit a cache of {} rows", s.position,
                         s.position + s.seq_new - 1, s.capacity));
  expect_elements(op, output(op, g, 0), cache.elements(), "the cache");
  s.kv = kv_storage(op, cache);
  return s;
}

SliceShape slice_shape(const Op& op, const Graph& g) {
  if (op.kind == OpKind::varlen_slice_last_token) fail(op, "is varlen: its shapes are gather_shape's");
  const Tensor& x = input(op, g, 0);
  const Tensor& y = output(op, g, 0);
  SliceShape s;
  s.cols = op.attrs.cols > 0 ? op.attrs.cols : (x.shape.empty() ? 1 : x.shape.back());
  expect_positive(op, s.cols, "cols");
  s.batch = y.elements() / s.cols;
  expect_positive(op, s.batch, "batch");
  s.seq = x.elements() / (s.batch * s.cols);
  expect_elements(op, y, s.batch * s.cols, "y: [batch, cols]");
  expect_elements(op, x, s.batch * s.seq * s.cols, "x: [batch·seq, cols]");
  return s;
}

// What each operand of a mixture-of-experts op is, in the order of core/graph/op_kind.hpp:
// 'l' logits [T, E], 'r' a routing tensor [T, k], 't' token rows [T, h], 'b' an expert buffer
// [E, C, h]. Which of the 'r' tensors are int32 the op-kind table says.
struct MoeLayout {
  const char* in;
  const char* out;
};

MoeLayout moe_layout(OpKind k) {
  switch (k) {
    case OpKind::moe_route: return {"l", "rrr"};
    case OpKind::moe_route_bwd: return {"lrr", "l"};
    case OpKind::moe_dispatch: return {"trr", "b"};
    case OpKind::moe_dispatch_bwd: return {"brr", "t"};
    case OpKind::moe_combine: return {"brrr", "t"};
    case OpKind::moe_combine_bwd: return {"tbrrr", "br"};
    default: return {"", ""};
  }
}

MoeShape moe_shape(const Op& op, const Graph& g) {
  const OpAttrs& at = op.attrs;
  const MoeLayout layout = moe_layout(op.kind);
  MoeShape s;
  s.experts = at.experts, s.top_k = at.top_k, s.capacity = at.capacity;
  s.expert_grad_scale = static_cast<float>(at.expert_grad_scale);
  if (!(s.expert_grad_scale > 0) || !std::isfinite(s.expert_grad_scale))
    fail(op, fmt::format("expert_grad_scale = {} must be a positive number", at.expert_grad_scale));
  expect_positive(op, s.experts, "experts");
  expect_positive(op, s.top_k, "top_k");
  if (s.top_k > s.experts) fail(op, fmt::format("top_k ({}) exceeds experts ({})", s.top_k, s.experts));
  const bool routes = op.kind == OpKind::moe_route || op.kind == OpKind::moe_route_bwd;
  // moe_route_bwd never reads the buffers: its capacity does not matter.
  if (op.kind != OpKind::moe_route_bwd) expect_positive(op, s.capacity, "capacity");
  // Tokens: the attribute, else the routing tensor (input 1, or moe_route's first output).
  const Tensor& routing = op.kind == OpKind::moe_route         ? output(op, g, 0)
                          : op.kind == OpKind::moe_combine_bwd ? input(op, g, 2)
                                                               : input(op, g, 1);
  s.tokens = at.rows > 0 ? at.rows : routing.elements() / s.top_k;
  expect_positive(op, s.tokens, "rows (tokens)");
  if (routes) {
    if (at.cols > 0 && at.cols != s.experts)
      fail(op, fmt::format("attribute cols = {} but a router's rows hold the {} experts' logits", at.cols, s.experts));
  } else {
    // Hidden size: the attribute, else the token-order tensor.
    const Tensor& rows = op.kind == OpKind::moe_dispatch || op.kind == OpKind::moe_combine_bwd ? input(op, g, 0)
                                                                                              : output(op, g, 0);
    s.hidden = at.cols > 0 ? at.cols : rows.elements() / s.tokens;
    expect_positive(op, s.hidden, "cols (hidden)");
  }
  auto check = [&](const Tensor& t, char what, bool is_output, std::size_t i) {
    switch (what) {
      case 'l': expect_elements(op, t, s.tokens * s.experts, "[tokens, experts]"); break;
      case 'r': expect_elements(op, t, s.tokens * s.top_k, "[tokens, top_k]"); break;
      case 't': expect_elements(op, t, s.tokens * s.hidden, "[tokens, hidden]"); break;
      case 'b': expect_elements(op, t, s.experts * s.capacity * s.hidden, "[experts, capacity, hidden]"); break;
      default: break;
    }
    if (fixed_operand_dtype(op.kind, is_output, i) == DType::int32 && t.dtype != DType::int32)
      fail(op, fmt::format("expert ids and slots '{}' must be int32", t.name));
  };
  for (std::size_t i = 0; i < op.inputs.size() && layout.in[i] != 0; ++i)
    check(input(op, g, i), layout.in[i], false, i);
  for (std::size_t i = 0; i < op.outputs.size() && layout.out[i] != 0; ++i)
    check(output(op, g, i), layout.out[i], true, i);
  return s;
}

std::vector<AdamWGroupIds> adamw_groups(const Op& op, const Graph& g) {
  std::vector<AdamWGroupIds> groups;
  std::size_t i = 0, o = 0;
  while (i < op.inputs.size()) {
    const bool master = g.tensor(op.inputs[i]).role == TensorRole::master_weight;
    const std::size_t ni = master ? 5 : 4, no = master ? 4 : 3;
    if (i + ni > op.inputs.size() || o + no > op.outputs.size())
      fail(op, fmt::format("group {} is incomplete: groups are {{param, grad, m, v}} (+ weight "
                           "after an fp32 master) -> {{param, m, v}} (+ weight)", groups.size()));
    AdamWGroupIds gr;
    gr.param = op.inputs[i], gr.grad = op.inputs[i + 1], gr.m = op.inputs[i + 2], gr.v = op.inputs[i + 3];
    gr.param_out = op.outputs[o], gr.m_out = op.outputs[o + 1], gr.v_out = op.outputs[o + 2];
    if (master) gr.weight = op.inputs[i + 4], gr.weight_out = op.outputs[o + 3];
    const int64_t n = g.tensor(gr.param).elements();
    for (int id : {gr.grad, gr.m, gr.v, gr.weight, gr.param_out, gr.m_out, gr.v_out, gr.weight_out})
      if (id >= 0) expect_elements(op, g.tensor(id), n, "an AdamW group's tensors");
    groups.push_back(gr);
    i += ni;
    o += no;
  }
  if (o != op.outputs.size())
    fail(op, fmt::format("has {} outputs but its groups write {}", op.outputs.size(), o));
  return groups;
}

AdamWParams adamw_params(const Op& op) {
  AdamWParams p;
  p.lr = static_cast<float>(op.attrs.lr);
  p.beta1 = static_cast<float>(op.attrs.beta1);
  p.beta2 = static_cast<float>(op.attrs.beta2);
  p.weight_decay = static_cast<float>(op.attrs.weight_decay);
  return p;
}

VarlenAttnShape varlen_attn_shape(const Op& op, const Graph& g) {
  const OpAttrs& at = op.attrs;
  if (op.kind != OpKind::varlen_flash_attention) fail(op, "is not a varlen_flash_attention");
  VarlenAttnShape a;
  a.seqs = at.batch, a.tokens = at.rows;
  a.heads = at.heads;
  a.kv_heads = at.kv_heads > 0 ? at.kv_heads : at.heads;
  a.head_dim = at.head_dim;
  a.max_q = at.seq_q, a.max_kv = at.seq_kv;
  a.decode_seqs = at.decode_seqs;
  a.alibi_heads = at.alibi_heads;
  expect_positive(op, a.seqs, "batch (sequences)");
  expect_positive(op, a.tokens, "rows (tokens)");
  expect_positive(op, a.heads, "heads");
  expect_positive(op, a.head_dim, "head_dim");
  expect_positive(op, a.max_q, "seq_q (longest query run)");
  expect_positive(op, a.max_kv, "seq_kv (longest KV length)");
  if (a.heads % a.kv_heads != 0)
    fail(op, fmt::format("heads ({}) is not a multiple of kv_heads ({})", a.heads, a.kv_heads));
  if (a.decode_seqs < 0 || a.decode_seqs > a.seqs)
    fail(op, fmt::format("decode_seqs = {} is outside 0..{} sequences", a.decode_seqs, a.seqs));
  if (at.kv_block <= 0) fail(op, "reads a paged cache: attribute kv_block must be positive");
  a.paged = paged_layout(op, g, a.seqs);
  if (a.max_kv > a.paged.block * a.paged.max_blocks)
    fail(op, fmt::format("seq_kv = {} is more than the {} rows a sequence's pages hold", a.max_kv,
                         a.paged.block * a.paged.max_blocks));
  const int64_t q_elements = a.tokens * a.heads * a.head_dim;
  const int64_t pool_elements = a.paged.num_blocks * a.paged.block * a.kv_heads * a.head_dim;
  expect_elements(op, input(op, g, 0), q_elements, "Q: [tokens, heads, head_dim]");
  expect_elements(op, input(op, g, 1), pool_elements, "K pages: [num_blocks, kv_block, kv_heads, head_dim]");
  expect_elements(op, input(op, g, 2), pool_elements, "V pages: [num_blocks, kv_block, kv_heads, head_dim]");
  const Tensor& query_start = input(op, g, 4);
  const Tensor& kv_len = input(op, g, 5);
  expect_int32(op, query_start, "query starts");
  expect_int32(op, kv_len, "KV lengths");
  expect_elements(op, query_start, a.seqs + 1, "query_start: [sequences + 1]");
  expect_elements(op, kv_len, a.seqs, "kv_len: [sequences]");
  expect_elements(op, output(op, g, 0), q_elements, "O: [tokens, heads, head_dim]");
  expect_elements(op, output(op, g, 1), a.heads * a.tokens, "LSE: [heads, tokens]");
  a.kv = kv_storage(op, input(op, g, 1));
  return a;
}

KvSlotsShape kv_slots_shape(const Op& op, const Graph& g) {
  const OpAttrs& at = op.attrs;
  if (op.kind != OpKind::varlen_kv_append) fail(op, "is not a varlen_kv_append");
  const Tensor& pages = input(op, g, 1);
  const Tensor& slots = input(op, g, 2);
  if (at.kv_block <= 0) fail(op, "writes into pages: attribute kv_block must be positive");
  if (pages.shape.size() != 4 || pages.shape[1] != at.kv_block)
    fail(op, fmt::format("pages '{}' must be [num_blocks, {}, kv_heads, head_dim]", pages.name, at.kv_block));
  KvSlotsShape s;
  s.row = at.kv_heads > 0 && at.head_dim > 0 ? at.kv_heads * at.head_dim : pages.shape[2] * pages.shape[3];
  expect_positive(op, s.row, "kv_heads·head_dim");
  s.pool_rows = pages.shape[0] * at.kv_block;
  expect_elements(op, pages, s.pool_rows * s.row, "pages: [num_blocks, kv_block, kv_heads, head_dim]");
  expect_int32(op, slots, "slots");
  s.tokens = slots.elements();
  if (at.rows > 0) expect_elements(op, slots, at.rows, "slots: [tokens]");
  expect_elements(op, input(op, g, 0), s.tokens * s.row, "k_new: [tokens, kv_heads·head_dim]");
  expect_elements(op, output(op, g, 0), pages.elements(), "the pages");
  s.kv = kv_storage(op, pages);
  return s;
}

GatherShape gather_shape(const Op& op, const Graph& g) {
  if (op.kind != OpKind::varlen_slice_last_token) fail(op, "is not a varlen_slice_last_token");
  const Tensor& x = input(op, g, 0);
  const Tensor& rows = input(op, g, 1);
  GatherShape s;
  s.cols = op.attrs.cols > 0 ? op.attrs.cols : (x.shape.empty() ? 1 : x.shape.back());
  expect_positive(op, s.cols, "cols");
  s.x_rows = x.elements() / s.cols;
  expect_positive(op, s.x_rows, "x rows");
  expect_elements(op, x, s.x_rows * s.cols, "x: [tokens, cols]");
  expect_int32(op, rows, "rows kept");
  s.n = rows.elements();
  expect_elements(op, output(op, g, 0), s.n * s.cols, "y: [rows kept, cols]");
  return s;
}

void check_op(const Op& op, const Graph& g) {
  check_arity(op);
  if (const std::string why = kv_block_error(op); !why.empty()) throw NotExecutable(why);  // names the op
  switch (op.kind) {
    case OpKind::gemm: (void)gemm_shape(op, g); break;
    case OpKind::attn_scores: case OpKind::attn_softmax: case OpKind::attn_context:
    case OpKind::attn_context_bwd: case OpKind::attn_softmax_bwd: case OpKind::attn_scores_bwd:
    case OpKind::flash_attention: case OpKind::paged_flash_attention: case OpKind::flash_attention_bwd:
    case OpKind::attn_merge:
      (void)attn_shape(op, g);
      break;
    case OpKind::varlen_flash_attention: (void)varlen_attn_shape(op, g); break;
    case OpKind::layernorm: case OpKind::layernorm_bwd: case OpKind::rmsnorm:
    case OpKind::rmsnorm_bwd: case OpKind::add_rmsnorm: case OpKind::add_layernorm:
    case OpKind::cross_entropy: case OpKind::batchnorm: case OpKind::batchnorm_infer:
    case OpKind::batchnorm_bwd: (void)row_shape(op, g); break;
    case OpKind::conv2d: case OpKind::conv2d_dgrad: case OpKind::conv2d_wgrad: case OpKind::maxpool:
    case OpKind::maxpool_bwd: case OpKind::avgpool: case OpKind::avgpool_bwd: (void)conv_shape(op, g); break;
    case OpKind::relu: case OpKind::relu_bwd:
    case OpKind::gelu: case OpKind::gelu_bwd: case OpKind::silu_mul: case OpKind::silu_mul_bwd:
    case OpKind::residual_add: case OpKind::copy: (void)elementwise_count(op, g); break;
    case OpKind::rope: case OpKind::varlen_rope: case OpKind::rope_bwd: (void)rope_shape(op, g); break;
    case OpKind::embedding: case OpKind::embedding_bwd: (void)embedding_shape(op, g); break;
    case OpKind::adamw: (void)adamw_groups(op, g); break;
    case OpKind::kv_append: case OpKind::paged_kv_append: (void)kv_append_shape(op, g); break;
    case OpKind::varlen_kv_append: (void)kv_slots_shape(op, g); break;
    case OpKind::slice_last_token: (void)slice_shape(op, g); break;
    case OpKind::varlen_slice_last_token: (void)gather_shape(op, g); break;
    case OpKind::moe_route: case OpKind::moe_route_bwd: case OpKind::moe_dispatch:
    case OpKind::moe_dispatch_bwd: case OpKind::moe_combine: case OpKind::moe_combine_bwd:
      (void)moe_shape(op, g);
      break;
    case OpKind::collective: case OpKind::host: break;
  }
}

}  // namespace perfsim::ops
