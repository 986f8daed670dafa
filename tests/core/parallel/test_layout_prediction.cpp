// Pricing a parallel layout: a one-stage layout is its rank's timeline; a pipeline joins its
// stages through the simulated schedule (bubble, in-flight activations); tokens and utilisation
// count every GPU; a rank that does not fit says which stage and by how much.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>

#include "approx.hpp"
#include "core/builders/streams.hpp"
#include "core/cost/formulas.hpp"
#include "core/cost/cost_model.hpp"
#include "core/parallel/layout_prediction.hpp"
#include "core/parallel/micro_batches.hpp"
#include "core/parallel/plan.hpp"
#include "graph_test_models.hpp"
#include "hardware_test_util.hpp"

using namespace perfsim;
using perfsim::test::approx;
using namespace perfsim::test_models;

namespace {

Workload train(int64_t grad_accum, int64_t seq = 1024) {
  Workload w;
  w.phase = Phase::train;
  w.batch = 1;
  w.seq = seq;
  w.grad_accum = grad_accum;
  return w;
}

const std::vector<StackStep> bf16_flash = {
    {"bf16", {{"bf16", {}}, {"flash_attention", {}}}, ""}};

// Llama-3-8B's layers with a vocabulary of 256: the embedding and head cost next to nothing,
// so every pipeline stage does the same work.
ModelConfig uniform_llama() { return llama("uniform-llama", 32, 4096, 32, 8, 14336, 256, 8192); }

LayoutPrediction price(const ModelConfig& m, const Workload& w, const ParallelSpec& p, const Hardware& hw) {
  return predict_layout(build_rank_graphs(m, w, bf16_flash, 0, p, 2), p, hw);
}

}  // namespace

TEST_CASE("layout prediction: without a pipeline the rank's own timeline is the step") {
  ParallelSpec p;
  p.dp = 8;
  const Hardware hw = h100_node();
  const std::vector<RankGraph> ranks = build_rank_graphs(llama3_8b(), train(2), bf16_flash, 0, p, 2);
  REQUIRE(ranks.size() == 1);
  const Prediction rank = predict(ranks.front().graph, hw);
  const LayoutPrediction lp = predict_layout(ranks, p, hw);
  CHECK(lp.gpus == 8);
  CHECK(lp.step_time == approx(rank.step_time));
  CHECK(lp.bubble_fraction == 0);
  // Every replica's tokens: 1 sequence × 1,024 tokens × 2 micro-batches × 8 replicas.
  CHECK(lp.tokens_per_step == approx(1024.0 * 2 * 8));
  CHECK(lp.tokens_per_second == approx(lp.tokens_per_step / lp.step_time));
  CHECK(lp.tokens_per_second_per_gpu == approx(lp.tokens_per_second / 8));
  // Every GPU does what rank 0 does: the layout's MFU is the rank's.
  CHECK(lp.mfu == approx(rank.mfu));
  // DDP's gradient all-reduce is the only collective, partly hidden behind backward.
  REQUIRE(lp.communication.count(Collective::all_reduce) == 1);
  CHECK(lp.communication.at(Collective::all_reduce).total == approx(rank.communication_time));
  CHECK(lp.communication.at(Collective::all_reduce).exposed < rank.communication_time);
  const Prediction step = step_prediction(lp);
  CHECK(step.step_time == approx(lp.step_time));
  CHECK(step.memory.peak == approx(lp.memory_peak));
}

TEST_CASE("layout prediction: uniform pipeline stages give 1F1B's bubble, (p−1)/(m+p−1)") {
  const Hardware hw = h100_node();
  for (int m : {4, 8, 32}) {
    CAPTURE(m);
    ParallelSpec p;
    p.pp = 4;
    const LayoutPrediction lp = price(uniform_llama(), train(m), p, hw);
    REQUIRE(lp.ranks.size() == 4);
    // Stages are alike to within their embedding and head; the transfers between them take
    // microseconds against passes of milliseconds: the closed form holds to a few percent.
    CHECK(lp.bubble_fraction == approx(formulas::pipeline_bubble_fraction(4, m)).epsilon(0.02));
    // The step is no shorter than any stage's own work.
    for (const RankPrediction& r : lp.ranks) CHECK(lp.step_time >= r.prediction.step_time);
    // 1F1B: stage s holds p − s micro-batches' activations at most (Narayanan et al. 2021 §2.2.1).
    for (int s = 0; s < 4; ++s) {
      const RankPrediction& r = lp.ranks[static_cast<std::size_t>(s)];
      CHECK(r.in_flight == std::min(4 - s, m));
      CHECK(r.memory_peak == approx(r.prediction.memory.peak + (r.in_flight - 1) * r.saved_per_micro_batch));
    }
    CHECK(lp.worst_rank == 0);
  }
}

TEST_CASE("layout prediction: interleaving two chunks a stage shrinks the bubble") {
  const Hardware hw = h100_node();
  ParallelSpec p;
  p.pp = 4;
  const LayoutPrediction plain = price(uniform_llama(), train(8), p, hw);
  p.interleave = 2;
  p.schedule = PipelineSchedule::interleaved;
  const LayoutPrediction chunks = price(uniform_llama(), train(8), p, hw);
  CHECK(chunks.bubble_fraction < plain.bubble_fraction);
  CHECK(chunks.step_time < plain.step_time);
  // Bubble over ideal time: (p − 1)/(v·m) = 3/16 (Narayanan et al. 2021 §2.2.2).
  const double ratio = chunks.bubble_fraction / (1 - chunks.bubble_fraction);
  CHECK(ratio == approx(formulas::interleaved_bubble_ratio(4, 8, 2)).epsilon(0.03));
}

TEST_CASE("layout prediction: a rank that does not fit names its stage and its bytes") {
  Hardware hw = h100_node();
  hw.memory_bytes = 8e9;
  ParallelSpec p;
  p.pp = 2;
  const LayoutPrediction lp = price(llama3_8b(), train(4), p, hw);
  CHECK_FALSE(lp.fits);
  CHECK(lp.does_not_fit.rfind(fmt::format("stage {} needs ", lp.worst_rank), 0) == 0);
  CHECK(lp.does_not_fit.find("of 7.45 GiB") != std::string::npos);
  CHECK(lp.memory_min <= lp.memory_peak);
  CHECK_FALSE(step_prediction(lp).fits);
}

TEST_CASE("layout prediction: tensor-parallel decode counts each sequence once") {
  Workload w;
  w.phase = Phase::decode;
  w.batch = 8;
  w.prompt = 512;
  w.new_tokens = 64;
  ParallelSpec p;
  p.tp = 8;
  const Hardware hw = h100_node();
  const LayoutPrediction lp = price(llama3_8b(), w, p, hw);
  CHECK(lp.gpus == 8);
  CHECK(lp.tokens_per_step == approx(8));  // one new token per sequence; the 8 ranks share them
  // Two all-reduces a layer on the critical path: all of it exposed.
  REQUIRE(lp.communication.count(Collective::all_reduce) == 1);
  CHECK(lp.communication.at(Collective::all_reduce).exposed ==
        approx(lp.communication.at(Collective::all_reduce).total).epsilon(0.05));
  // A stage of one GPU's work spread over eight is faster than one GPU.
  ParallelSpec one;
  const LayoutPrediction single = predict_layout(build_rank_graphs(llama3_8b(), w, bf16_flash, 0, one, 2), one, hw);
  CHECK(lp.step_time < single.step_time);
}

TEST_CASE("layout prediction: an inference pipeline idles each stage while the others run") {
  // Links of no latency and no limit: the sends between stages are free.
  Hardware hw = h100_node();
  hw.nvlink = {1e30, 0};
  hw.infiniband = {1e30, 0};
  Workload w;
  w.phase = Phase::prefill;
  w.batch = 1;
  w.prompt = 2048;
  ParallelSpec p;
  p.pp = 4;
  const LayoutPrediction lp = price(uniform_llama(), w, p, hw);
  REQUIRE(lp.ranks.size() == 4);
  CHECK(lp.transfer_time < 1e-15);
  // One batch through four equal stages in turn: each works a quarter of the step.
  double busiest = 0, forwards = 0, after = 0;
  for (const RankPrediction& r : lp.ranks) {
    busiest = std::max(busiest, r.forward);
    forwards += r.forward;
    after = std::max(after, r.after_pipeline);
  }
  CHECK(lp.step_time == approx(forwards + after));
  CHECK(lp.bubble_fraction == approx((lp.step_time - busiest) / lp.step_time));
  CHECK(lp.bubble_fraction == approx(0.75).epsilon(0.02));
  // Without a pipeline nothing waits.
  ParallelSpec tp;
  tp.tp = 4;
  CHECK(price(uniform_llama(), w, tp, hw).bubble_fraction == 0);
}

TEST_CASE("layout prediction: the pipeline's transfer is its send, not ring attention's") {
  // Context parallelism adds send/recvs of its own (the K/V ring, context stream): the stages'
  // transfer is the send on the pipeline stream.
  const Hardware hw = h100_node();
  ParallelSpec p;
  p.cp = 2;
  p.pp = 2;
  const std::vector<RankGraph> ranks = build_rank_graphs(uniform_llama(), train(4), bf16_flash, 0, p, 2);
  const LayoutPrediction lp = predict_layout(ranks, p, hw);
  const Graph& g = ranks.front().graph;
  const Prediction& priced = lp.ranks.front().prediction;
  double pipeline = -1, ring = -1;
  int first_send_stream = -1;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind != OpKind::collective || op.attrs.collective != Collective::send_recv) continue;
    if (first_send_stream < 0) first_send_stream = op.stream;
    if (op.stream == pipeline_stream && pipeline < 0) pipeline = priced.ops[i].time;
    if (op.stream == context_stream && ring < 0) ring = priced.ops[i].time;
  }
  // Stage 0 meets the ring's sends first (layer 0's attention), its pipeline send last.
  CHECK(first_send_stream == context_stream);
  REQUIRE(pipeline > 0);
  REQUIRE(ring > 0);
  CHECK(ring != approx(pipeline));
  CHECK(lp.transfer_time == approx(pipeline));
  // The schedule's transfers cost what the pipeline sends add; the ring's sends are the
  // rank's own communication, counted among the send/recvs.
  REQUIRE(lp.communication.count(Collective::send_recv) == 1);
  CHECK(lp.communication.at(Collective::send_recv).total > 0);
  CHECK(lp.communication.at(Collective::send_recv).exposed >= 0);
}

TEST_CASE("layout prediction: each stage's layers, the first ones more when uneven") {
  ParallelSpec p;
  p.pp = 3;
  const LayoutPrediction lp = price(uniform_llama(), train(3), p, h100_node());  // 32 layers: 11 11 10
  REQUIRE(lp.ranks.size() == 3);
  CHECK(lp.ranks[0].layers == 11);
  CHECK(lp.ranks[1].layers == 11);
  CHECK(lp.ranks[2].layers == 10);
}

TEST_CASE("layout prediction: the micro-batches in flight, against the step unrolled over them") {
  // The saved activations of one micro-batch do not depend on how many a step has; stage s of
  // a 1F1B pipeline holds p − s of them at once, and the memory model run over the step with
  // every micro-batch's passes copied out (what the ranks execute) agrees with the formula.
  const Hardware hw = h100_node();
  ParallelSpec p;
  p.pp = 2;
  const std::vector<RankGraph> one = build_rank_graphs(uniform_llama(), train(1), bf16_flash, 0, p, 2);
  const std::vector<RankGraph> four = build_rank_graphs(uniform_llama(), train(4), bf16_flash, 0, p, 2);
  const LayoutPrediction lp1 = predict_layout(one, p, hw), lp4 = predict_layout(four, p, hw);
  for (int s = 0; s < 2; ++s) {
    CAPTURE(s);
    const RankPrediction& r = lp4.ranks[static_cast<std::size_t>(s)];
    CHECK(r.saved_per_micro_batch == approx(lp1.ranks[static_cast<std::size_t>(s)].saved_per_micro_batch));
    CHECK(r.saved_executed_per_micro_batch > 0);
    CHECK(r.in_flight == 2 - s);
    const Graph unrolled = unroll_micro_batches(four[static_cast<std::size_t>(s)].graph, p, s).graph;
    CHECK(r.memory_executed_peak == approx(predict(unrolled, hw).memory_executed.peak).epsilon(0.02));
  }
}

TEST_CASE("layout prediction: an interleaved stage holds chunks of micro-batches, against the step unrolled") {
  // 2 stages × 2 chunks, 4 micro-batches: stage 0 runs 4 warm-up chunk forwards and holds 5
  // chunks' activations at most (2.5 micro-batches' of its layers), stage 1 holds 3 (1.5); the
  // memory model run over the unrolled step (what the ranks execute) agrees.
  const Hardware hw = h100_node();
  ParallelSpec p;
  p.pp = 2;
  p.interleave = 2;
  p.schedule = PipelineSchedule::interleaved;
  const std::vector<RankGraph> four = build_rank_graphs(uniform_llama(), train(4), bf16_flash, 0, p, 4);
  const LayoutPrediction lp = predict_layout(four, p, hw);
  for (int s = 0; s < 2; ++s) {
    CAPTURE(s);
    const RankPrediction& r = lp.ranks[static_cast<std::size_t>(s)];
    CHECK(r.in_flight == approx(s == 0 ? 2.5 : 1.5));
    const Graph unrolled = unroll_micro_batches(four[static_cast<std::size_t>(s)].graph, p, s).graph;
    CHECK(r.memory_executed_peak == approx(predict(unrolled, hw).memory_executed.peak).epsilon(0.03));
  }
}
