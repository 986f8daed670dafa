-- Prefill at a long prompt: materialized attention (scores and probabilities in memory) against
-- FlashAttention, which never writes them. The gap grows with prompt² in time and memory.
-- The defaults take minutes on a CPU of two cores; on a GPU try --set prompt=8192 --set repeats=5.
local opt = options {
  model   = {"model from the zoo (perfsim list models)", "llama-3-8b"},
  batch   = {"sequences prefilled together", 1},
  prompt  = {"prompt tokens", 2048},
  layers  = {"transformer layers to execute (0 = all); the rest are scaled", 1},
  repeats = {"timed runs per step (per-op figures are medians)", 1},
}

return scenario {
  name = "prefill",
  description = "Long-prompt prefill, materialized attention vs FlashAttention",
  model = model(opt.model),
  hardware = {"H100-SXM", "A100-80GB", "L4"},
  workload = prefill { batch = opt.batch, prompt = opt.prompt },
  stacks = {
    step("materialized bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
  },
  execute = { layers = opt.layers, repeats = opt.repeats, warmup = 1 },
}
