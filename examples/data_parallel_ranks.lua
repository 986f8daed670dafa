-- A data-parallel training step executed for real on as many ranks as `gpus`:
--   perfsim run examples/data_parallel_ranks.lua --gpus 2             (GPU ranks, or CPU with --backend cpu)
--   perfsim run examples/data_parallel_ranks.lua --set gpus=1         (the same step alone: no communication)
-- Each rank runs its own micro-batch; DDP all-reduces the gradient buckets on a communication
-- stream during backward, ZeRO shards the optimizer state, gradients and (ZeRO-3) weights.
-- docs/RANKS.md explains what runs and how the ranks report.
local opt = options {
  model = {"model from the zoo", "gpt2-medium"},
  gpus = {"data-parallel ranks: start perfsim with as many (--gpus N, mpirun -np N)", 2},
  batch = {"sequences per rank (micro-batch)", 8},
  seq = {"tokens per sequence", 1024},
}
local dp = opt.gpus
return scenario {
  name = "data_parallel_ranks",
  model = model(opt.model), hardware = "H100-SXM",
  workload = train { batch = opt.batch, seq = opt.seq },
  parallel = { dp = dp },
  execute = { layers = 0 },
  stacks = {
    step("bf16 DDP", "bf16", "flash_attention"),
    step("ZeRO-1", {zero = dp > 1 and 1 or 0}),
    step("ZeRO-2", {zero = dp > 1 and 2 or 0}),
    step("ZeRO-3 (FSDP)", {zero = dp > 1 and 3 or 0}),
  },
}
