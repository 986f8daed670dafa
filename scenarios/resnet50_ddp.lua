-- ResNet-50 data-parallel training: bf16 AMP with a fused optimizer on one GPU, then PyTorch-DDP
-- style data parallelism over 2, 8 and 64 GPUs (gradients all-reduced in buckets as backward
-- writes them, overlapped with it), and ZeRO-1 over 64. Each GPU trains `batch` images a step;
-- images/s and scaling are the whole job's. Batch norm keeps each GPU's own statistics.
--   perfsim run scenarios/resnet50_ddp.lua
--   perfsim run scenarios/resnet50_ddp.lua --backend cpu --gpus 2 --set model=tiny-resnet --set batch=4
local opt = options {
  model = {"image model from the zoo (perfsim list models)", "resnet-50"},
  batch = {"images a GPU trains a step", 64},
}

return scenario {
  name = "resnet50_ddp",
  description = "ResNet-50 training scaled by data parallelism",
  model = model(opt.model),
  hardware = {"H100-SXM", "A100-80GB"},
  workload = train { batch = opt.batch },
  stacks = {
    step("1 GPU", "bf16", "fused_optimizer"),
    step("dp=2", {dp = 2}),
    step("dp=8", {dp = 8}),
    step("dp=64", {dp = 64}),
    step("dp=64 zero=1", {zero = 1}),
  },
  execute = { repeats = 3, warmup = 1 },
}
