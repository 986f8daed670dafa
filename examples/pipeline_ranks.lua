-- A two-stage pipeline executed for real on two ranks (one micro-batch: the batch goes forward
-- through stage 0 then stage 1, and its gradient back), beside the same step on one GPU:
--   perfsim run examples/pipeline_ranks.lua --gpus 2
--   perfsim run examples/pipeline_ranks.lua --set stages=1
-- The stages wait for each other, so the step takes about as long as on one GPU, plus the
-- transfers at the edge: what a pipeline of one micro-batch buys is memory, not time.
local opt = options {
  model = {"model from the zoo", "gpt2-medium"},
  stages = {"pipeline stages: start perfsim with as many ranks (--gpus N)", 2},
  batch = {"sequences", 8},
  seq = {"tokens per sequence", 1024},
}
return scenario {
  name = "pipeline_ranks",
  model = model(opt.model), hardware = "H100-SXM",
  workload = train { batch = opt.batch, seq = opt.seq },
  parallel = { pp = opt.stages },
  execute = { layers = 0 },
  stacks = { step("bf16 pipeline", "bf16", "flash_attention") },
}
