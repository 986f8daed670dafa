-- Llama-style decode: one generation step at the mean context, through the classic serving
-- stack (bf16 -> FlashAttention -> CUDA graphs -> fp8 -> batching -> paged KV cache). Predicted on the listed
-- GPUs; executed on the backend with one transformer layer (the rest scaled by count).
local opt = options {
  model      = {"model from the zoo (perfsim list models)", "llama-3-8b"},
  batch      = {"sequences decoded together before +batching", 1},
  prompt     = {"prompt tokens already in the KV cache", 512},
  new_tokens = {"tokens generated per sequence (the step sits at prompt + new_tokens/2)", 128},
  layers     = {"transformer layers to execute (0 = all); the rest are scaled", 1},
  repeats    = {"timed runs per step (per-op figures are medians)", 3},
}

return scenario {
  name = "llm_decode",
  description = "Llama-style decode step through the classic serving stack",
  model = model(opt.model),
  hardware = {"H100-SXM", "A100-80GB"},
  workload = decode { batch = opt.batch, prompt = opt.prompt, new_tokens = opt.new_tokens },
  stacks = {
    step("baseline", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+cuda_graphs", "cuda_graphs"),
    step("+fp8", "fp8"),
    step("+batching", {batch = 32}),
    step("+paged_kv", "paged_kv"),
  },
  execute = { layers = opt.layers, repeats = opt.repeats, warmup = 1 },
}
