// A pipeline stage's step unrolled over its micro-batches: each micro-batch's passes in the
// schedule's order, its own activations and inputs, the loss's mean over the whole step, and
// what runs once per step after the last micro-batch's backward.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "core/builders/streams.hpp"
#include "core/errors.hpp"
#include "core/parallel/micro_batches.hpp"
#include "core/parallel/pipeline_schedule.hpp"
#include "core/parallel/plan.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::test_models;

namespace {

ParallelSpec pipeline(int pp, int dp = 1, int zero = 0) {
  ParallelSpec p;
  p.pp = pp;
  p.dp = dp;
  p.zero = zero;
  return p;
}

Graph stage_graph(const ParallelSpec& p, int stage, int64_t micro_batches) {
  Workload w;
  w.phase = Phase::train;
  w.batch = 1;
  w.seq = 32;
  w.grad_accum = micro_batches;
  return build_rank_graphs(tiny_gpt(), w, {StackStep{"fp32", {}, ""}}, 0, p).at(static_cast<std::size_t>(stage)).graph;
}

// The passes of `g` in issue order: (forward or backward, micro-batch, chunk), one entry per run
// of ops of one pass.
std::vector<PipelineSlot> passes_of(const Graph& g) {
  std::vector<PipelineSlot> out;
  for (const Op& op : g.ops) {
    const int micro = micro_batch_of(op.name);
    if (micro < 0) continue;
    const bool backward = op.stage == Stage::backward || op.recomputed;
    const PipelineSlot slot{backward ? PassKind::backward : PassKind::forward, micro, op.chunk};
    if (out.empty() || !(out.back() == slot)) out.push_back(slot);
  }
  return out;
}

}  // namespace

TEST_CASE("micro-batches: names of copies") {
  CHECK(micro_batch_name("layer0.attn.q", 3) == "mb3/layer0.attn.q");
  std::string base;
  CHECK(micro_batch_of("mb12/cross_entropy.loss", &base) == 12);
  CHECK(base == "cross_entropy.loss");
  CHECK(micro_batch_of("layer0.attn.q") == -1);
  CHECK(micro_batch_of("mb/x") == -1);
  CHECK(micro_batch_of("mbx/y") == -1);
}

TEST_CASE("micro-batches: each stage runs its passes in the 1F1B order") {
  const ParallelSpec p = pipeline(2);
  for (int stage = 0; stage < 2; ++stage) {
    CAPTURE(stage);
    const Graph g = stage_graph(p, stage, 4);
    const MicroBatchGraph u = unroll_micro_batches(g, p, stage);
    CHECK(passes_of(u.graph) == pipeline_order(PipelineSchedule::one_f_one_b, 2, 4, 1, stage));
    REQUIRE(u.origin.size() == u.graph.ops.size());
    // Every forward and backward op four times, at a quarter of its count; the optimizer once.
    std::vector<int> copies(g.ops.size(), 0);
    for (std::size_t i = 0; i < u.graph.ops.size(); ++i) {
      const Op& stage_op = g.ops.at(static_cast<std::size_t>(u.origin[i]));
      ++copies[static_cast<std::size_t>(u.origin[i])];
      CHECK(u.graph.ops[i].kind == stage_op.kind);
      if (micro_batch_of(u.graph.ops[i].name) >= 0) CHECK(u.graph.ops[i].count == doctest::Approx(stage_op.count / 4));
    }
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      CAPTURE(g.ops[i].name);
      const bool pass = g.ops[i].stage == Stage::forward || g.ops[i].stage == Stage::backward;
      CHECK(copies[i] == (pass ? 4 : 1));
    }
    // The optimizer steps come last, once.
    CHECK(u.graph.ops.back().stage == Stage::optimizer);
  }
}

TEST_CASE("micro-batches: GPipe runs every forward before any backward") {
  ParallelSpec p = pipeline(2);
  p.schedule = PipelineSchedule::gpipe;
  const MicroBatchGraph u = unroll_micro_batches(stage_graph(p, 1, 3), p, 1);
  CHECK(passes_of(u.graph) == pipeline_order(PipelineSchedule::gpipe, 2, 3, 1, 1));
}

TEST_CASE("micro-batches: activations and inputs per micro-batch, weights and gradients shared") {
  const ParallelSpec p = pipeline(2, 2);
  const Graph g = stage_graph(p, 0, 2);
  const MicroBatchGraph u = unroll_micro_batches(g, p, 0);
  std::set<std::string> names;
  for (const Tensor& t : u.graph.tensors) {
    names.insert(t.name);
    const bool copied = micro_batch_of(t.name) >= 0;
    CAPTURE(t.name);
    CHECK(copied == (t.role == TensorRole::activation || t.role == TensorRole::input));
    if (t.role == TensorRole::input) {
      // Micro-batch i of the data-parallel rank's part: the whole holds 2 ranks × 2 micro-batches.
      REQUIRE(t.shard.size() == 1);
      CHECK(t.shard[0].of == "tokens");
      CHECK(t.shard[0].parts == 2);
      CHECK(t.shard[0].micros == 2);
      CHECK(t.shard[0].micro == micro_batch_of(t.name));
      CHECK(t.shard[0].whole.at(0) == t.shape.at(0) * 4);
    }
  }
  CHECK(names.count("mb0/tokens") == 1);
  CHECK(names.count("mb1/tokens") == 1);
  CHECK(names.count("tokens") == 0);  // the stage graph's own, no longer read
  CHECK(names.count("embedding.weight.grad") == 1);
}

TEST_CASE("micro-batches: the loss's gradient is the mean over the whole step") {
  const ParallelSpec p = pipeline(2);
  const MicroBatchGraph u = unroll_micro_batches(stage_graph(p, 1, 4), p, 1);
  int losses = 0;
  for (const Op& op : u.graph.ops)
    if (op.kind == OpKind::cross_entropy) {
      ++losses;
      CHECK(op.attrs.loss_rows == 4 * op.attrs.rows);
    }
  CHECK(losses == 4);
}

TEST_CASE("micro-batches: data-parallel gradient buckets run once, after the last micro-batch's backward") {
  const ParallelSpec p = pipeline(2, 2);
  const MicroBatchGraph u = unroll_micro_batches(stage_graph(p, 0, 3), p, 0);
  int last_backward = -1, first_bucket = -1, buckets = 0;
  for (std::size_t i = 0; i < u.graph.ops.size(); ++i) {
    const Op& op = u.graph.ops[i];
    if (micro_batch_of(op.name) == 2 && op.stage == Stage::backward && op.kind != OpKind::collective)
      last_backward = static_cast<int>(i);
    if (op.kind == OpKind::collective && op.attrs.collective == Collective::all_reduce && op.attrs.average) {
      ++buckets;
      CHECK(micro_batch_of(op.name) == -1);
      if (first_bucket < 0) first_bucket = static_cast<int>(i);
    }
  }
  CHECK(buckets > 0);
  // The first bucket goes as soon as the last micro-batch has written its gradients, inside that
  // backward, not before it.
  int last_micro_begin = -1;
  for (std::size_t i = 0; i < u.graph.ops.size(); ++i)
    if (micro_batch_of(u.graph.ops[i].name) == 2 && u.graph.ops[i].stage == Stage::backward) {
      last_micro_begin = static_cast<int>(i);
      break;
    }
  CHECK(first_bucket > last_micro_begin);
  CHECK(last_backward > last_micro_begin);
}

TEST_CASE("micro-batches: an interleaved stage runs each slot's chunk, in the interleaved order") {
  ParallelSpec p = pipeline(2, 2);
  p.interleave = 2;
  p.schedule = PipelineSchedule::interleaved;
  for (int stage = 0; stage < 2; ++stage) {
    CAPTURE(stage);
    const Graph g = stage_graph(p, stage, 4);
    CHECK(micro_batch_unsupported_reason(g, p).empty());
    const MicroBatchGraph u = unroll_micro_batches(g, p, stage);
    CHECK(passes_of(u.graph) == pipeline_order(PipelineSchedule::interleaved, 2, 4, 2, stage));
    // A data-parallel bucket runs after the last micro-batch's backward of the chunk whose
    // gradients it holds, and before the next slot; the optimizer after everything.
    for (std::size_t i = 0; i < u.graph.ops.size(); ++i) {
      const Op& op = u.graph.ops[i];
      if (op.kind != OpKind::collective || op.stream != gradient_stream) continue;
      CAPTURE(op.name);
      int micro = -1, chunk = -1;
      for (std::size_t j = i; j-- > 0;)
        if (micro_batch_of(u.graph.ops[j].name) >= 0) {
          micro = micro_batch_of(u.graph.ops[j].name);
          chunk = u.graph.ops[j].chunk;
          break;
        }
      CHECK(micro == 3);
      // Every gradient it reduces is written by no later op.
      for (int id : op.inputs)
        for (std::size_t j = i + 1; j < u.graph.ops.size(); ++j)
          if (u.graph.ops[j].stage == Stage::backward)
            for (int out : u.graph.ops[j].outputs) CHECK(out != id);
      CHECK(chunk >= 0);
    }
    CHECK(u.graph.ops.back().stage == Stage::optimizer);
  }
}

TEST_CASE("micro-batches: layouts not executed as several micro-batches say why") {
  const Graph g = stage_graph(pipeline(2), 0, 2);
  CHECK(micro_batch_unsupported_reason(g, pipeline(2, 2, 2)).find("ZeRO-2/3") != std::string::npos);
  CHECK(micro_batch_unsupported_reason(g, pipeline(2, 2, 1)).empty());
  CHECK_THROWS_AS((void)unroll_micro_batches(g, pipeline(2, 2, 3), 0), ConfigError);
}

TEST_CASE("micro-batches: a weight gradient accumulates over micro-batches (every op writing one reads it)") {
  // The norms' kernels write their weights' gradients: with several micro-batches each one's
  // goes to its own buffer and is added.
  for (const ModelConfig& m : {tiny_gpt(), tiny_llama()}) {
    Workload w;
    w.phase = Phase::train;
    w.batch = 1;
    w.seq = 32;
    w.grad_accum = 2;
    const Graph g = build_stack_graph(m, w, {StackStep{"fp32", {}, ""}}, 0, BuildOptions{});
    for (const Op& op : g.ops) {
      if (op.stage != Stage::backward) continue;
      for (int out : op.outputs) {
        if (g.tensor(out).role != TensorRole::gradient) continue;
        CAPTURE(op.name);
        CHECK(std::find(op.inputs.begin(), op.inputs.end(), out) != op.inputs.end());
      }
    }
  }
}
