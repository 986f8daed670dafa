// ParallelSpec: GPU counts, descriptions, and a one-line error for each layout that cannot run.
#include <doctest/doctest.h>

#include <string>

#include "core/errors.hpp"
#include "core/config/parallel.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using namespace perfsim::test_models;

namespace {

Workload train(int64_t seq = 8192, int64_t grad_accum = 16) {
  Workload w;
  w.phase = Phase::train;
  w.batch = 1;
  w.seq = seq;
  w.grad_accum = grad_accum;
  return w;
}

// The message validate() throws, or "" when the layout is accepted.
std::string error_of(const ParallelSpec& p, const ModelConfig& m, const Workload& w, int gpus = 0) {
  try {
    validate(p, m, w, gpus);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("parallel spec: GPU count and description") {
  ParallelSpec p;
  CHECK(p.gpus() == 1);
  CHECK_FALSE(p.parallel());
  CHECK(describe(p) == "single GPU");
  p.tp = 8, p.pp = 4, p.dp = 16, p.sp = true, p.zero = 1;
  p.schedule = PipelineSchedule::interleaved, p.interleave = 2;
  CHECK(p.gpus() == 512);
  CHECK(p.parallel());
  CHECK(describe(p) == "tp=8 pp=4 dp=16 sp zero=1 interleaved×2");
  ParallelSpec z;
  z.zero = 3;  // sharding alone on one GPU is still a parallel setting
  CHECK(z.parallel());
  ParallelSpec f;
  f.fsdp = FsdpStrategy::shard_grad_op;
  f.dp = 8;
  CHECK(f.sharding_stage() == 2);
  CHECK(describe(f) == "dp=8 fsdp=shard_grad_op");
}

TEST_CASE("parallel spec: the issue's 512-GPU Llama layout is accepted") {
  ModelConfig m = llama("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192);
  ParallelSpec p;
  p.tp = 8, p.pp = 4, p.dp = 16, p.sp = true, p.zero = 1;
  p.schedule = PipelineSchedule::interleaved, p.interleave = 2;
  CHECK(error_of(p, m, train(), 512).empty());
  CHECK(error_of(p, m, train()).empty());  // no GPU count given: nothing to match
}

TEST_CASE("parallel spec: each bad layout names its field and what to change") {
  const ModelConfig m = llama3_8b();  // 32 heads, 8 KV heads, MLP 14336, 32 layers
  ParallelSpec p;

  p.tp = 0;
  CHECK(error_of(p, m, train()) == "parallel.tp must be a whole number >= 1 (got 0)");
  p = {};
  p.tp = 3;
  CHECK(error_of(p, m, train()) ==
        "parallel.tp = 3 does not divide llama-3-8b's 32 attention heads; use tp = 1, 2, 4 or 8");
  p.tp = 16;  // divides the 32 heads, not the 8 KV heads
  CHECK(error_of(p, m, train()) ==
        "parallel.tp = 16 does not divide llama-3-8b's 8 KV heads; use tp = 1, 2, 4 or 8");
  ModelConfig odd_mlp = tiny_llama();  // 4 heads, 2 KV heads, MLP 128
  odd_mlp.ffn_hidden = 129;
  p.tp = 2;
  CHECK(error_of(p, odd_mlp, train(256, 1)) ==
        "parallel.tp = 2 does not divide tiny-llama's MLP width 129; use tp = 1");

  p = {};
  p.pp = 40;
  CHECK(error_of(p, m, train()) == "parallel.pp = 40 is more than llama-3-8b's 32 layers; use pp <= 32");
  p.pp = 8, p.interleave = 2;
  CHECK(error_of(p, m, train()).empty());  // 1F1B over two chunks a stage is interleaved 1F1B
  CHECK(p.pipeline_schedule() == PipelineSchedule::interleaved);
  p.schedule = PipelineSchedule::gpipe;
  CHECK(error_of(p, m, train()) ==
        "parallel.interleave = 2 needs schedule = \"interleaved\" (interleaved 1F1B; GPipe runs one chunk per "
        "stage)");
  p.schedule = PipelineSchedule::interleaved, p.interleave = 8;
  CHECK(error_of(p, m, train()) ==
        "parallel: pp · interleave = 8 · 8 model chunks is more than llama-3-8b's 32 layers; lower interleave");
  p.interleave = 2;
  CHECK(error_of(p, m, train(8192, 12)) ==
        "parallel.schedule = \"interleaved\" needs the micro-batches (grad_accum = 12) to be a multiple of pp = 8");
  CHECK(error_of(p, m, train(8192, 16)).empty());

  // Sequence parallelism splits what the tensor-parallel ranks hold whole: none without them.
  p = {};
  p.sp = true;
  CHECK(error_of(p, m, train()) ==
        "parallel.sp = true with tp = 1: sequence parallelism splits the norms and dropout of the "
        "tensor-parallel ranks, and there are none; set tp > 1 or drop sp");
  p.dp = 8;  // other degrees do not stand in for tp
  CHECK(error_of(p, m, train()).rfind("parallel.sp = true with tp = 1", 0) == 0);
  p.tp = 2;
  CHECK(error_of(p, m, train()).empty());

  p = {};
  p.ep = 8;
  CHECK(error_of(p, m, train()) == "parallel.ep = 8 needs a mixture-of-experts model; llama-3-8b has no experts");

  p = {};
  p.cp = 3;
  CHECK(error_of(p, m, train(8192)) ==
        "parallel.cp = 3 cannot split seq = 8192 into 2·cp = 6 equal chunks (causal load balance); use a cp "
        "that divides seq/2");
  p.cp = 4;
  CHECK(error_of(p, m, train(8192)).empty());
  Workload decode;
  CHECK(error_of(p, m, decode) ==
        "parallel.cp = 4 splits a sequence over GPUs; a decode step has one new token per sequence: use cp = 1");
  Workload prefill;
  prefill.phase = Phase::prefill;
  prefill.prompt = 100;  // 100 / 8 is not whole
  CHECK(error_of(p, m, prefill) ==
        "parallel.cp = 4 cannot split prompt = 100 into 2·cp = 8 equal chunks (causal load balance); use a cp "
        "that divides prompt/2");

  p = {};
  p.zero = 4;
  CHECK(error_of(p, m, train()) == "parallel.zero must be a ZeRO stage from 0 to 3 (got 4)");
  p.zero = 3, p.fsdp = FsdpStrategy::shard_grad_op;
  CHECK(error_of(p, m, train()) ==
        "parallel.zero = 3 contradicts fsdp = \"shard_grad_op\" (which is ZeRO-2); give one of them");
  p.zero = 3, p.fsdp = FsdpStrategy::full_shard;  // the same thing said twice
  CHECK(error_of(p, m, train()).empty());
  p.zero = 0;
  CHECK(error_of(p, m, decode) == "parallel.fsdp shards training state; a decode step has none: leave it out");
  p.fsdp = FsdpStrategy::none, p.zero = 1;
  CHECK(error_of(p, m, decode) == "parallel.zero shards training state; a decode step has none: leave it out");

  p = {};
  p.tp = 8, p.dp = 2;
  CHECK(error_of(p, m, train(), 8) ==
        "parallel: dp · tp · pp · cp = 2 · 8 · 1 · 1 = 16 GPUs, but gpus = 8; change a degree so the product is 8");
  CHECK(error_of(p, m, train(), 16).empty());
  Workload tp8_decode;
  CHECK(error_of(p, m, tp8_decode, 16).empty());  // tensor and data parallel inference
}

TEST_CASE("parallel spec: pipeline stages share the layers, the first stages one more when uneven") {
  CHECK(stage_layers(80, 4, 0) == 20);
  CHECK(stage_layers(80, 4, 3) == 20);
  CHECK(stage_layers(10, 4, 0) == 3);  // 3 3 2 2
  CHECK(stage_layers(10, 4, 1) == 3);
  CHECK(stage_layers(10, 4, 2) == 2);
  CHECK(stage_first_layer(10, 4, 2) == 6);
  CHECK(stage_first_layer(10, 4, 3) == 8);
  // The report says how uneven stages split, and nothing when they are even.
  CHECK(describe_stages(82, 4) == "21 layers on stages 0-1, 20 on stages 2-3 (uneven)");
  CHECK(describe_stages(10, 4) == "3 layers on stages 0-1, 2 on stages 2-3 (uneven)");
  CHECK(describe_stages(9, 4) == "3 layers on stage 0, 2 on stages 1-3 (uneven)");
  CHECK(describe_stages(11, 4) == "3 layers on stages 0-2, 2 on stage 3 (uneven)");
  CHECK(describe_stages(80, 4).empty());
  CHECK(describe_stages(7, 1).empty());
  ParallelSpec p;
  p.tp = 8;
  p.cp = 2;
  p.dp = 4;
  CHECK(p.dp_stride() == 16);
  CHECK(p.pp_stride() == 64);
}
