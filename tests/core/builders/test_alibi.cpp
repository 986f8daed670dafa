// ALiBi models (Press et al. 2022): no position embedding or rotary ops, every attention op told
// the heads whose slopes bias its scores, the softmax's bias priced, and what refuses it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/builders/builders.hpp"
#include "core/config/parallel.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "core/passes/passes.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::test_models;

namespace {

ModelConfig alibi_gpt() {
  ModelConfig m = tiny_gpt();  // 4 layers, h 64, 4 heads, vocab 100, max_seq 256
  m.name = "tiny-alibi";
  m.alibi = true;
  return m;
}

Workload train(int64_t batch, int64_t seq) {
  Workload w;
  w.phase = Phase::train;
  w.batch = batch, w.seq = seq;
  return w;
}

bool is_attention(OpKind k) {
  return k == OpKind::attn_scores || k == OpKind::attn_softmax || k == OpKind::attn_context ||
         k == OpKind::attn_context_bwd || k == OpKind::attn_softmax_bwd || k == OpKind::attn_scores_bwd ||
         k == OpKind::flash_attention || k == OpKind::flash_attention_bwd;
}

}  // namespace

TEST_CASE("ALiBi: no position table, no max_seq limit, and not with rope") {
  const ModelConfig learned = tiny_gpt(), alibi = alibi_gpt();
  // The learned table is max_seq × hidden = 256 · 64 = 16,384 parameters.
  CHECK(learned.params() - alibi.params() == 16384);
  ModelConfig both = alibi;
  both.rope = true;
  CHECK_THROWS_WITH_AS(validate(both), "model 'tiny-alibi': rope and alibi are two ways of placing positions; choose one",
                       ConfigError);
  // Learned positions stop at max_seq; the graph of linear biases has no table to run out of
  // (scenarios still keep a workload within max_seq, the context the model was trained for).
  CHECK_THROWS_AS((void)build_graph(learned, train(1, 512), BuildOptions{1}), ConfigError);
  CHECK_NOTHROW((void)build_graph(alibi, train(1, 512), BuildOptions{1}));
}

TEST_CASE("ALiBi: attention ops carry the model's heads; no rope or position ops") {
  const ModelConfig m = alibi_gpt();
  for (const std::vector<std::string>& passes :
       std::vector<std::vector<std::string>>{{"fp32"}, {"bf16", "flash_attention"}, {"bf16", "recompute"}}) {
    CAPTURE(passes.back());
    std::vector<StackStep> stack;
    for (const std::string& p : passes) stack.push_back({p, {{p, {}}}});
    const Graph g = build_stack_graph(m, train(2, 32), stack, stack.size() - 1, BuildOptions{2});
    int attention = 0;
    for (const Op& op : g.ops) {
      CHECK(op.kind != OpKind::rope);
      if (op.kind == OpKind::embedding) CHECK(op.inputs.size() == 2);  // ids and table, no positions
      if (!is_attention(op.kind)) continue;
      ++attention;
      CHECK(op.attrs.alibi_heads == 4);
    }
    CHECK(attention > 0);
    CHECK(g.find_tensor("position_embedding.weight") < 0);
  }
  // Decode reading a KV cache: the bias on the query at position context against every key.
  Workload d;
  d.phase = Phase::decode;
  d.batch = 2, d.prompt = 24, d.new_tokens = 8;
  const Graph g = build_graph(m, d, BuildOptions{1});
  for (const Op& op : g.ops)
    if (op.kind == OpKind::attn_softmax) CHECK(op.attrs.alibi_heads == 4);
}

TEST_CASE("ALiBi: the materialized softmax pays 2 FLOPs a score for the bias, flash attention none") {
  // b 2 × heads 4 × 32 × 32 scores = 8,192: softmax 5 → 7 FLOPs each (Press et al. 2022, §3:
  // a multiply by the slope and an add).
  const Graph plain = build_graph(tiny_gpt(), train(2, 32), BuildOptions{1});
  const Graph alibi = build_graph(alibi_gpt(), train(2, 32), BuildOptions{1});
  auto softmax_flops = [](const Graph& g) {
    for (const Op& op : g.ops)
      if (op.kind == OpKind::attn_softmax) return op_flops(op, g);
    return -1.0;
  };
  CHECK(softmax_flops(plain) == 5.0 * 8192);
  CHECK(softmax_flops(alibi) == 7.0 * 8192);
  std::vector<StackStep> flash{{"fa", {{"flash_attention", {}}}}};
  const Graph fa = build_stack_graph(tiny_gpt(), train(2, 32), flash, 0, BuildOptions{1});
  const Graph fa_alibi = build_stack_graph(alibi_gpt(), train(2, 32), flash, 0, BuildOptions{1});
  for (OpKind k : {OpKind::flash_attention, OpKind::flash_attention_bwd}) {
    double a = 0, b = 0;
    for (const Op& op : fa.ops) a += op.kind == k ? op_flops(op, fa) : 0;
    for (const Op& op : fa_alibi.ops) b += op.kind == k ? op_flops(op, fa_alibi) : 0;
    CHECK(a == b);
  }
}

TEST_CASE("ALiBi: context parallelism is refused, tensor parallelism splits the heads") {
  ParallelSpec cp;
  cp.cp = 2;
  CHECK_THROWS_WITH_AS(validate(cp, alibi_gpt(), train(1, 64), 0),
                       "parallel.cp = 2 with ALiBi (tiny-alibi) is not modelled yet: use cp = 1", ConfigError);
  CHECK_NOTHROW(validate(cp, tiny_gpt(), train(1, 64), 0));
  // A tensor-parallel rank holds 2 of the 4 heads and still names the model's 4.
  BuildOptions o{1};
  o.parallel.tp = 2;
  const Graph g = build_graph(alibi_gpt(), train(1, 32), o);
  for (const Op& op : g.ops)
    if (op.kind == OpKind::attn_softmax) {
      CHECK(op.attrs.heads == 2);
      CHECK(op.attrs.alibi_heads == 4);
    }
}
