-- A training step on one 8-GPU node, through the stack a practitioner climbs: fp32 with DDP,
-- bf16 mixed precision, pinned memory with prefetch of the next batch, activation recompute to
-- afford a larger micro-batch, FSDP (ZeRO-3) to shard the training state, then fused kernels.
-- Every GPU runs its own micro-batch; the report shows the layout, tokens/s per GPU, MFU, the
-- communication the step waits for and memory per GPU. Predicted on the layout (multi-GPU
-- execution is not run by this scenario).
local opt = options {
  model      = {"model from the zoo (perfsim list models)", "gpt2-xl"},
  gpus       = {"data-parallel GPUs", 8},
  batch      = {"micro-batch (sequences per GPU per forward/backward)", 4},
  big_batch  = {"the micro-batch recompute makes room for", 16},
  seq        = {"sequence length", 1024},
  grad_accum = {"micro-batches per step", 4},
}

return scenario {
  name = "train_cluster",
  description = "data-parallel training on one node, from fp32 DDP to FSDP and fusion",
  model = model(opt.model),
  hardware = {"H100-SXM", "A100-80GB"},
  workload = train { batch = opt.batch, seq = opt.seq, grad_accum = opt.grad_accum },
  host_data = true,
  parallel = { gpus = opt.gpus },
  stacks = {
    step("fp32 DDP", "fp32"),
    step("+bf16 AMP", "bf16"),
    step("+pinned+prefetch", "pinned_memory", "prefetch"),
    step("+recompute, larger batch", "recompute", {batch = opt.big_batch}),
    step("+FSDP", {zero = 3}),
    step("+fusion", "fusion", "fused_optimizer"),
  },
  execute = { enabled = false },
}
