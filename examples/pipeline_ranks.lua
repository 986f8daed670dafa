-- A two-stage pipeline executed for real on two ranks: the batch cut into micro-batches that
-- stage 0 and stage 1 run in the 1F1B order (Megatron's: stage 0 runs one forward ahead, then
-- each backward frees a micro-batch before the next forward), their activations sent forward
-- and their gradients back, one optimizer step at the end. Beside it, the same step on one GPU:
--   perfsim run examples/pipeline_ranks.lua --gpus 2
--   perfsim run examples/pipeline_ranks.lua --set stages=1
--   perfsim run examples/pipeline_ranks.lua --gpus 2 --set micro_batches=1   (no overlap at all)
-- With m micro-batches over p stages each stage idles (p − 1)/(m + p − 1) of the step (the
-- bubble), and the Ranks section shows what it measured.
local opt = options {
  model = {"model from the zoo", "gpt2-medium"},
  stages = {"pipeline stages: start perfsim with as many ranks (--gpus N)", 2},
  micro_batches = {"micro-batches per step (grad_accum)", 4},
  schedule = {"pipeline schedule: 1f1b or gpipe", "1f1b"},
  batch = {"sequences per micro-batch", 2},
  seq = {"tokens per sequence", 1024},
}
return scenario {
  name = "pipeline_ranks",
  model = model(opt.model), hardware = "H100-SXM",
  workload = train { batch = opt.batch, seq = opt.seq, grad_accum = opt.micro_batches },
  parallel = { pp = opt.stages, schedule = opt.schedule },
  execute = { layers = 0 },
  stacks = { step("bf16 pipeline", "bf16", "flash_attention") },
}
