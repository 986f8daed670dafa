-- Data loading in a training step: the token ids and targets start in host memory and every
-- micro-batch uploads them to the device. What does that cost, and what do pinned memory
-- (no staging copy through the driver) and prefetching (the next micro-batch uploads on a
-- copy stream while this one computes) buy? The smaller the step, the more the upload shows.
-- Defaults run in seconds on a CPU; on a GPU try --set model=gpt2 --set batch=8 --set seq=1024.
local opt = options {
  model      = {"model from the zoo (perfsim list models)", "tiny-llama"},
  batch      = {"micro-batch (sequences per forward/backward)", 8},
  seq        = {"sequence length", 256},
  grad_accum = {"micro-batches per optimizer step (one upload each)", 4},
  layers     = {"transformer layers to execute (0 = all); the rest are scaled", 0},
  repeats    = {"timed runs per step (per-op figures are medians)", 3},
}

return scenario {
  name = "data_loading",
  description = "Training step fed from host memory: pageable, pinned, prefetched",
  model = model(opt.model),
  hardware = {"H100-SXM", "A100-80GB", "L4"},
  workload = train { batch = opt.batch, seq = opt.seq, grad_accum = opt.grad_accum },
  host_data = true,
  stacks = {
    step("baseline bf16", "bf16"),
    step("+pinned_memory", "pinned_memory"),
    step("+prefetch", "prefetch"),
  },
  execute = { layers = opt.layers, repeats = opt.repeats, warmup = 1 },
}
