-- How decode throughput and memory grow with batch on one GPU: one report row per batch size.
-- Prediction-only by default (`perfsim run examples/batch_sweep.lua --backend none` is instant);
-- --set measure=true executes every point too (slow on a CPU).
local opt = options {
  model   = {"model from the zoo (perfsim list models)", "llama-3-8b"},
  prompt  = {"prompt tokens per sequence", 1024},
  measure = {"also execute each point on the backend", false},
}

return scenario {
  name = "batch_sweep",
  description = "Decode throughput vs batch size on an H100",
  model = model(opt.model),
  hardware = "H100-SXM",
  workload = decode { batch = 1, prompt = opt.prompt, new_tokens = 256 },
  stacks = {
    step("bf16 + flash + graphs", "bf16", "flash_attention", "cuda_graphs"),
    step("+fp8", "fp8"),
  },
  execute = { enabled = opt.measure, layers = 1, repeats = 2, warmup = 1 },
  sweep = { batch = {1, 2, 4, 8, 16, 32, 64} },
}
