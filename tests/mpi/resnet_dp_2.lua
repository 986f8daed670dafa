-- A tiny ResNet's data-parallel training step on 2 CPU ranks (DDP, then ZeRO-1): gradients
-- all-reduced in buckets as backward writes them. Batch norm keeps each rank's own batch
-- statistics, as PyTorch's DDP does without SyncBatchNorm, so the step is not one rank's step
-- over the whole batch: `perfsim run --gpus 2` executes it and reports both ranks.
return scenario {
  model = model "tiny-resnet", hardware = "H100-SXM",
  workload = train { batch = 2 },
  parallel = { dp = 2 },
  stacks = {
    step("ddp", {}),
    step("zero1", {zero = 1}),
  },
  execute = { repeats = 2, warmup = 1 },
}
