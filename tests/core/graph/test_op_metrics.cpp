// Op FLOPs and bytes on hand-sized ops, and graph_flops scaling by count.
#include <doctest/doctest.h>

#include "approx.hpp"
#include "core/builders/builders.hpp"
#include "core/cost/formulas.hpp"
#include "core/graph/op_metrics.hpp"
#include "graph_test_models.hpp"
#include "op_samples.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

int add(Graph& g, const char* name, std::vector<int64_t> shape, DType t = DType::fp32,
        TensorRole role = TensorRole::activation) {
  Tensor x;
  x.name = name;
  x.shape = std::move(shape);
  x.dtype = t;
  x.role = role;
  return g.add_tensor(std::move(x));
}

Op make(OpKind k, std::vector<int> in, std::vector<int> out) {
  Op op;
  op.kind = k;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  return op;
}

}  // namespace

TEST_CASE("op metrics: gemm flops and bytes") {
  Graph g;
  const int a = add(g, "a", {2, 4}), b = add(g, "b", {4, 3}, DType::fp32, TensorRole::weight);
  const int c = add(g, "c", {2, 3});
  Op op = make(OpKind::gemm, {a, b}, {c});
  op.attrs.m = 2, op.attrs.n = 3, op.attrs.k = 4;
  CHECK(op_flops(op, g) == 48);             // 2·2·3·4
  CHECK(op_bytes(op, g) == (8 + 12 + 6) * 4);  // each operand once, fp32
  g.tensor(a).dtype = g.tensor(b).dtype = g.tensor(c).dtype = DType::bf16;
  CHECK(op_bytes(op, g) == (8 + 12 + 6) * 2);
  op.attrs.batch = 3;
  CHECK(op_flops(op, g) == 144);
}

TEST_CASE("op metrics: attention counts the full rectangle; flash 4·bhqkd, bwd 2.5×") {
  Graph g;
  const int q = add(g, "q", {1, 3, 2, 4}), k = add(g, "k", {1, 5, 1, 4}), s = add(g, "s", {1, 2, 3, 5});
  Op op = make(OpKind::attn_scores, {q, k}, {s});
  op.attrs.batch = 1, op.attrs.heads = 2, op.attrs.kv_heads = 1, op.attrs.head_dim = 4;
  op.attrs.seq_q = 3, op.attrs.seq_kv = 5, op.attrs.kv_capacity = 5, op.attrs.causal = true;
  CHECK(op_flops(op, g) == 240);  // 2·1·2·3·5·4
  op.kind = OpKind::attn_softmax;
  CHECK(op_flops(op, g) == 150);  // 5 per score
  op.kind = OpKind::attn_scores_bwd;
  CHECK(op_flops(op, g) == 480);
  op.kind = OpKind::flash_attention;
  CHECK(op_flops(op, g) == 480);
  op.kind = OpKind::flash_attention_bwd;
  CHECK(op_flops(op, g) == 1200);
}

TEST_CASE("op metrics: attn_merge, 3 FLOPs an output element and 10 a row, every operand once") {
  // Two ring-attention blocks joined: O [b 2, q 3, h 4, d 8] and LSE [2, 4, 3] fp32 each.
  Graph g;
  const int oa = add(g, "oa", {6, 32}, DType::bf16), la = add(g, "la", {2, 4, 3});
  const int ob = add(g, "ob", {6, 32}, DType::bf16), lb = add(g, "lb", {2, 4, 3});
  const int o = add(g, "o", {6, 32}, DType::bf16), l = add(g, "l", {2, 4, 3});
  Op op = make(OpKind::attn_merge, {oa, la, ob, lb}, {o, l});
  op.attrs.batch = 2, op.attrs.seq_q = 3, op.attrs.heads = 4, op.attrs.head_dim = 8;
  CHECK(op_flops(op, g) == 2 * 3 * 4 * (3 * 8 + 10));  // 816
  CHECK(op_bytes(op, g) == 3 * 192 * 2 + 3 * 24 * 4);  // three O in bf16, three LSE in fp32: 1440
  CHECK(class_of(op.kind) == OpClass::pointwise);
  CHECK(kernel_launches(op) == 1);
}

TEST_CASE("op metrics: a KV cache is read only up to seq_kv, and appended one row") {
  Graph g;
  // Cache [batch 2, capacity 10, kv_heads 1, head_dim 4], 3 rows valid.
  const int q = add(g, "q", {2, 4}), cache = add(g, "k_cache", {2, 10, 1, 4}, DType::fp32, TensorRole::kv_cache);
  const int s = add(g, "s", {2, 1, 1, 3}), knew = add(g, "k_new", {2, 4});
  Op op = make(OpKind::attn_scores, {q, cache}, {s});
  op.attrs.batch = 2, op.attrs.heads = 1, op.attrs.kv_heads = 1, op.attrs.head_dim = 4;
  op.attrs.seq_q = 1, op.attrs.seq_kv = 3, op.attrs.kv_capacity = 10;
  // q 8 + valid K 2·3·4 = 24 + s 6 = 38 elements of 4 bytes.
  CHECK(op_bytes(op, g) == 38 * 4);
  Op app = make(OpKind::kv_append, {knew, cache}, {cache});
  app.attrs.batch = 2, app.attrs.seq_q = 1, app.attrs.kv_heads = 1, app.attrs.head_dim = 4;
  app.attrs.kv_capacity = 10, app.attrs.position = 2;
  CHECK(op_bytes(app, g) == (8 + 8) * 4);  // read the new rows, write them
  CHECK(op_flops(app, g) == 0);
}

TEST_CASE("op metrics: unfused AdamW streams its operands once per pass") {
  Graph g;
  const int p = add(g, "p", {10}, DType::fp32, TensorRole::weight);
  const int gr = add(g, "g", {10}, DType::fp32, TensorRole::gradient);
  const int m = add(g, "m", {10}, DType::fp32, TensorRole::optimizer_state);
  const int v = add(g, "v", {10}, DType::fp32, TensorRole::optimizer_state);
  Op op = make(OpKind::adamw, {p, gr, m, v}, {p, m, v});
  op.attrs.elements = 10;
  op.attrs.passes = 4;
  CHECK(op_bytes(op, g) == 4 * (4 + 3) * 40);  // 7 tensors of 40 bytes, 4 passes
  op.attrs.passes = 1;
  CHECK(op_bytes(op, g) == (4 + 3) * 40);
  CHECK(op_flops(op, g) == 120);  // 12 per parameter
}

TEST_CASE("op metrics: embedding gathers rows, slice copies one row per sequence") {
  Graph g;
  const int ids = add(g, "ids", {6}, DType::int32, TensorRole::input);
  const int table = add(g, "table", {1000, 8}, DType::fp32, TensorRole::weight);
  const int x = add(g, "x", {6, 8}), y = add(g, "y", {2, 8});
  Op e = make(OpKind::embedding, {ids, table}, {x});
  e.attrs.rows = 6, e.attrs.cols = 8;
  CHECK(op_bytes(e, g) == 6 * 4 + 48 * 4 + 48 * 4);  // not the whole table
  // Learned positions: 2 sequences of 3 tokens read the same 3 position rows (the second
  // from L2), so 24 of its elements count, not 48.
  const int pos = add(g, "pos", {16, 8}, DType::fp32, TensorRole::weight);
  Op ep = make(OpKind::embedding, {ids, table, pos}, {x});
  ep.attrs.rows = 6, ep.attrs.cols = 8, ep.attrs.batch = 2, ep.attrs.seq_q = 3;
  CHECK(op_bytes(ep, g) == 6 * 4 + 48 * 4 + 24 * 4 + 48 * 4);
  Op s = make(OpKind::slice_last_token, {x}, {y});
  s.attrs.batch = 2, s.attrs.seq_q = 3, s.attrs.cols = 8;
  CHECK(op_bytes(s, g) == 2 * 16 * 4);
}

TEST_CASE("op metrics: graph_flops multiplies by count") {
  Graph g;
  const int a = add(g, "a", {2, 4}), b = add(g, "b", {4, 3}), c = add(g, "c", {2, 3});
  Op op = make(OpKind::gemm, {a, b}, {c});
  op.attrs.m = 2, op.attrs.n = 3, op.attrs.k = 4;
  op.count = 16;
  g.add_op(op);
  op.count = 1;
  g.add_op(op);
  CHECK(graph_flops(g) == 48 * 17);
}

TEST_CASE("op metrics: decode step FLOPs match 2·params + attention per token") {
  const ModelConfig m = test_models::llama2_7b();
  Workload w;
  w.phase = Phase::decode;
  w.batch = 4;
  w.prompt = 512;
  w.new_tokens = 256;
  const Graph g = build_graph(m, w, BuildOptions{2});
  const double expected = 4 * formulas::decode_flops_per_token(m, w.decode_context());
  CHECK(graph_flops(g) == approx(expected).epsilon(0.02));
}

TEST_CASE("op metrics: mixed-precision AdamW writes the 16-bit weight without reading it") {
  Graph g;
  // One group {master fp32, grad bf16, m, v fp32, weight bf16} of 10 parameters.
  const int master = add(g, "p.master", {10}, DType::fp32, TensorRole::master_weight);
  const int gr = add(g, "g", {10}, DType::bf16, TensorRole::gradient);
  const int m = add(g, "m", {10}, DType::fp32, TensorRole::optimizer_state);
  const int v = add(g, "v", {10}, DType::fp32, TensorRole::optimizer_state);
  const int w = add(g, "p", {10}, DType::bf16, TensorRole::weight);
  Op op = make(OpKind::adamw, {master, gr, m, v, w}, {master, m, v, w});
  op.attrs.elements = 10;
  op.attrs.passes = 1;
  // Reads master 40 + grad 20 + m 40 + v 40; writes master 40 + m 40 + v 40 + weight 20.
  CHECK(op_bytes(op, g) == 140 + 140);  // 28 bytes per parameter (Micikevicius et al. 2018)
  op.attrs.passes = 4;
  CHECK(op_bytes(op, g) == 4 * 280);
  // Two groups in one multi-tensor op (fused_optimizer): each group counted the same way,
  // and a plain fp32 group {param, grad, m, v} still reads all four.
  const int p2 = add(g, "p2", {10}, DType::fp32, TensorRole::weight);
  const int g2 = add(g, "g2", {10}, DType::fp32, TensorRole::gradient);
  const int m2 = add(g, "m2", {10}, DType::fp32, TensorRole::optimizer_state);
  const int v2 = add(g, "v2", {10}, DType::fp32, TensorRole::optimizer_state);
  Op both = make(OpKind::adamw, {master, gr, m, v, w, p2, g2, m2, v2},
                 {master, m, v, w, p2, m2, v2});
  both.attrs.elements = 20;
  CHECK(op_bytes(both, g) == 280 + (4 + 3) * 40);
}

TEST_CASE("op metrics: mixture-of-experts routing and row moves, by hand") {
  // T = 4 tokens, E = 8 experts, k = 2, capacity C = 3, h = 5, bf16 rows: 8 choices, all of
  // which fit the 24 buffer rows. Routing tensors [4, 2]: 32 bytes each (fp32 / int32).
  Graph g;
  const int logits = add(g, "logits", {4, 8}, DType::bf16), x = add(g, "x", {4, 5}, DType::bf16);
  const int w = add(g, "w", {4, 2}), ex = add(g, "experts", {4, 2}, DType::int32);
  const int sl = add(g, "slots", {4, 2}, DType::int32), dl = add(g, "dlogits", {4, 8});
  const int xe = add(g, "xe", {8, 3, 5}, DType::bf16), y = add(g, "y", {4, 5}, DType::bf16);
  auto moe = [&](OpKind k, std::vector<int> in, std::vector<int> out, int64_t cols) {
    Op op = make(k, std::move(in), std::move(out));
    op.attrs.experts = 8, op.attrs.top_k = 2, op.attrs.capacity = 3, op.attrs.rows = 4, op.attrs.cols = cols;
    return op;
  };
  // Route: logits 4·8·2 = 64, weights/experts/slots 3·32 = 96; 8 choices × (8 comparisons + 3).
  const Op route = moe(OpKind::moe_route, {logits}, {w, ex, sl}, 8);
  CHECK(op_bytes(route, g) == 64 + 96);
  CHECK(op_flops(route, g) == 88);
  // Route backward: the 8 chosen logits (16 bytes), experts and dweights (64), dlogits 4·8·4
  // = 128; 7 per choice.
  const Op route_bwd = moe(OpKind::moe_route_bwd, {logits, ex, w}, {dl}, 8);
  CHECK(op_bytes(route_bwd, g) == 16 + 64 + 128);
  CHECK(op_flops(route_bwd, g) == 56);
  // Dispatch: x 4·5·2 = 40, experts and slots 64, every buffer row written 8·3·5·2 = 240.
  const Op dispatch = moe(OpKind::moe_dispatch, {x, ex, sl}, {xe}, 5);
  CHECK(op_bytes(dispatch, g) == 40 + 64 + 240);
  CHECK(op_flops(dispatch, g) == 0);
  // Dispatch backward: the 8 kept rows of dxe (8·5·2 = 80), experts and slots, dx 40; an add
  // per gathered element.
  const Op dispatch_bwd = moe(OpKind::moe_dispatch_bwd, {xe, ex, sl}, {x}, 5);
  CHECK(op_bytes(dispatch_bwd, g) == 80 + 64 + 40);
  CHECK(op_flops(dispatch_bwd, g) == 40);
  // Combine: 8 kept rows of ye (80), experts, slots, weights (96), y 40; a multiply-add each.
  const Op combine = moe(OpKind::moe_combine, {xe, ex, sl, w}, {y}, 5);
  CHECK(op_bytes(combine, g) == 80 + 96 + 40);
  CHECK(op_flops(combine, g) == 80);
  // Combine backward: dy 40, kept ye rows 80, routing 96; dye written whole (240), dweights 32.
  const Op combine_bwd = moe(OpKind::moe_combine_bwd, {y, xe, ex, sl, w}, {xe, w}, 5);
  CHECK(op_bytes(combine_bwd, g) == 40 + 80 + 96 + 240 + 32);
  CHECK(op_flops(combine_bwd, g) == 120);
  CHECK(kernel_launches(route) == 2);
  CHECK(kernel_launches(dispatch) == 2);
  CHECK(kernel_launches(combine) == 1);

  // Capacity 1: at most E·C = 8 rows are kept, whatever the 16 choices of 8 tokens at k = 2
  // ask (8 rows of 5 bf16 elements: 80 bytes read).
  const int ye1 = add(g, "ye1", {8, 1, 5}, DType::bf16), y8 = add(g, "y8", {8, 5}, DType::bf16);
  const int w8 = add(g, "w8", {8, 2}), ex8 = add(g, "experts8", {8, 2}, DType::int32);
  const int sl8 = add(g, "slots8", {8, 2}, DType::int32);
  Op c1 = moe(OpKind::moe_combine, {ye1, ex8, sl8, w8}, {y8}, 5);
  c1.attrs.capacity = 1, c1.attrs.rows = 8;
  CHECK(op_bytes(c1, g) == 80 + 3 * 64 + 80);
  CHECK(op_flops(c1, g) == 80);
}

TEST_CASE("op metrics: every flash attention kind's products are model FLOPs") {
  for (OpKind k : {OpKind::flash_attention, OpKind::paged_flash_attention, OpKind::varlen_flash_attention}) {
    CAPTURE(name_of(k));
    for (const test::OpSample& s : test::op_samples(k, DType::bf16)) {
      CAPTURE(s.label);
      CHECK(op_flops(s.op(), s.graph) > 0);
      CHECK(op_matmul_flops(s.op(), s.graph, true) == op_flops(s.op(), s.graph));
    }
  }
}

TEST_CASE("op metrics: ResNet-50's stem convolution, 118 M multiply-adds an image") {
  // 224×224×3 through 64 filters of 7×7, stride 2, padding 3: a 112×112 output, each element
  // 7·7·3 = 147 multiply-adds: 112·112·64·147 = 118,013,952 per image (He et al. 2016 count
  // ResNet-50 at 3.8–4.1 G multiply-adds, the stem about 3% of it).
  Graph g;
  const int x = add(g, "x", {2, 224, 224, 3}, DType::bf16);
  const int w = add(g, "w", {64, 7, 7, 3}, DType::bf16, TensorRole::weight);
  const int y = add(g, "y", {2, 112, 112, 64}, DType::bf16);
  Op op = make(OpKind::conv2d, {x, w}, {y});
  op.dtype = DType::bf16;
  op.attrs.batch = 2;
  op.attrs.conv = ConvGeometry{224, 224, 3, 64, 7, 7, 2, 3, 1, 1};
  CHECK(op.attrs.conv.out_h() == 112);
  CHECK(op_flops(op, g) == approx(2.0 * 2 * 118013952.0));
  CHECK(op_matmul_flops(op, g, true) == approx(op_flops(op, g)));
  // Every operand once: 2·224·224·3 + 64·7·7·3 + 2·112·112·64 bf16 elements.
  CHECK(op_bytes(op, g) == approx(2.0 * (2 * 224 * 224 * 3 + 64 * 7 * 7 * 3 + 2 * 112 * 112 * 64)));
  // Its data and weight gradients are products of the same size.
  op.kind = OpKind::conv2d_wgrad;
  CHECK(op_flops(op, g) == approx(2.0 * 2 * 118013952.0));
  // A grouped convolution sums over its group's channels only: 4 groups, a quarter.
  op.kind = OpKind::conv2d;
  op.attrs.conv = ConvGeometry{56, 56, 128, 128, 3, 3, 1, 1, 1, 4};
  CHECK(op_flops(op, g) == approx(2.0 * 2 * 56 * 56 * 128 * 9 * 32));
  // The stem's 3×3/2 max pool over the 112×112 map: 9 comparisons an output element.
  op.kind = OpKind::maxpool;
  op.attrs.conv = ConvGeometry{112, 112, 64, 64, 3, 3, 2, 1, 1, 1};
  CHECK(op.attrs.conv.out_h() == 56);
  CHECK(op_flops(op, g) == approx(2.0 * 56 * 56 * 64 * 9));
}
