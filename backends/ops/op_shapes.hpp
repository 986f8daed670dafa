// Kernel shapes for a graph op, derived from its attributes and checked against the shapes
// of the tensors it reads and writes (core/graph/op_kind.hpp is the table). Any inconsistency
// throws NotExecutable naming the op, before a kernel could read out of bounds.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/ops/kernel_shapes.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::ops {

struct RowsCols {
  int64_t rows = 0, cols = 0;
};

struct SliceShape {
  int64_t batch = 0, seq = 0, cols = 0;
};

// One AdamW group's tensor ids: inputs {param, grad, m, v (, weight)} and the outputs they
// map to {param, m, v (, weight)}; weight == -1 when param is not an fp32 master.
struct AdamWGroupIds {
  int param = -1, grad = -1, m = -1, v = -1, weight = -1;
  int param_out = -1, m_out = -1, v_out = -1, weight_out = -1;
};

// A GEMM's operands by tensor id: {A, B} (+ C when accumulating) -> {C}; c_in is -1 when the
// GEMM overwrites C.
struct GemmIds {
  int a = -1, b = -1, c_in = -1, c = -1;
};
[[nodiscard]] GemmIds gemm_ids(const Op& op);
// A copy's operands by tensor id: {x} -> {y}.
struct CopyIds {
  int x = -1, y = -1;
};
[[nodiscard]] CopyIds copy_ids(const Op& op);

// Outputs that start from an input's values, the kernel then updating them in place: a KV
// cache appended to, an accumulating embedding_bwd's tables. Each pair is (input index, output
// index); a backend copies the input into the output first when the graph names two tensors.
struct InPlace {
  std::size_t input = 0, output = 0;
};
[[nodiscard]] std::vector<InPlace> in_place_operands(const Op& op);

// Throws unless the op has as many inputs and outputs as its kind takes.
void check_arity(const Op& op);

[[nodiscard]] GemmShape gemm_shape(const Op& op, const Graph& g);
[[nodiscard]] AttnShape attn_shape(const Op& op, const Graph& g);
// Norms (x = input 0) and cross-entropy (logits = input 0): [rows, cols].
[[nodiscard]] RowsCols row_shape(const Op& op, const Graph& g);
// Pointwise ops and copies: every operand holds this many elements.
[[nodiscard]] int64_t elementwise_count(const Op& op, const Graph& g);
[[nodiscard]] RopeShape rope_shape(const Op& op, const Graph& g);
// conv2d, conv2d_dgrad, conv2d_wgrad, maxpool(_bwd), avgpool(_bwd): the geometry of attrs.conv
// checked (positive sizes, channels and filters divisible by groups, an output of at least one
// pixel, a pool keeping its channels) and the operands' sizes against it.
[[nodiscard]] ConvShape conv_shape(const Op& op, const Graph& g);
[[nodiscard]] EmbeddingShape embedding_shape(const Op& op, const Graph& g);
[[nodiscard]] KvAppendShape kv_append_shape(const Op& op, const Graph& g);
// The page pool of a paged_kv_append, paged_flash_attention or varlen_flash_attention
// (attrs.kv_block rows per page): block size, table columns and pages, checked against the
// pages tensor (input 1) and the table (the last input; input 3 of a varlen_flash_attention,
// before its query starts and KV lengths). A varlen_kv_append has no table (kv_slots_shape).
[[nodiscard]] PagedLayout paged_layout(const Op& op, const Graph& g, int64_t batch);
[[nodiscard]] SliceShape slice_shape(const Op& op, const Graph& g);
// Mixture-of-experts ops: E, k, C and T from the attributes (T, when rows is 0, from the
// [T, k] routing tensors), h from cols (dispatch, combine) or the token rows.
[[nodiscard]] MoeShape moe_shape(const Op& op, const Graph& g);
[[nodiscard]] std::vector<AdamWGroupIds> adamw_groups(const Op& op, const Graph& g);
[[nodiscard]] AdamWParams adamw_params(const Op& op);

// The varlen kinds (a serving engine's step; op_kind.hpp gives the operands).
// varlen_flash_attention: shapes from the attributes (batch = S, rows = T, seq_q, seq_kv, heads,
// kv_heads, head_dim, decode_seqs) checked against Q, the pages, the table [S, max_blocks],
// query starts [S + 1], KV lengths [S], O and LSE [heads, T].
[[nodiscard]] VarlenAttnShape varlen_attn_shape(const Op& op, const Graph& g);
// varlen_kv_append: k_new [T, kv_heads, head_dim] into pages through slots [T].
struct KvSlotsShape {
  int64_t tokens = 0, row = 0, pool_rows = 0;
  KvStorage kv;  // the pages'
};
[[nodiscard]] KvSlotsShape kv_slots_shape(const Op& op, const Graph& g);
// varlen_slice_last_token: x [x_rows, cols] -> y [n, cols] through rows [n].
struct GatherShape {
  int64_t n = 0, x_rows = 0, cols = 0;
};
[[nodiscard]] GatherShape gather_shape(const Op& op, const Graph& g);

// Runs the checks above that apply to the op's kind, and that its kv_block suits the kind
// (kv_block_error, core/graph/graph.hpp).
void check_op(const Op& op, const Graph& g);

}  // namespace perfsim::ops
