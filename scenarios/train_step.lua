-- GPT-style training step (forward, backward, AdamW) through the classic training stack:
-- fp32 -> bf16 mixed precision -> fused AdamW -> kernel fusion -> activation recompute.
-- Defaults are sized to execute quickly on a CPU; raise seq and batch for GPU-sized steps.
local opt = options {
  model   = {"model from the zoo (perfsim list models)", "gpt2-medium"},
  batch   = {"micro-batch (sequences per forward/backward)", 1},
  seq     = {"sequence length", 256},
  layers  = {"transformer layers to execute (0 = all); the rest are scaled", 1},
  repeats = {"timed runs per step (per-op figures are medians)", 2},
}

return scenario {
  name = "train_step",
  description = "GPT-style training step through the classic training stack",
  model = model(opt.model),
  hardware = {"H100-SXM", "A100-80GB"},
  workload = train { batch = opt.batch, seq = opt.seq, grad_accum = 1 },
  stacks = {
    step("fp32", "fp32"),
    step("+bf16 AMP", "bf16"),
    step("+fused_optimizer", "fused_optimizer"),
    step("+fusion", "fusion"),
    step("+recompute", "recompute"),
  },
  execute = { layers = opt.layers, repeats = opt.repeats, warmup = 1 },
}
