-- What speculative decoding buys a decode step, and where it stops paying: Llama-3-8B decoding
-- with 4 n-gram drafts a step at two acceptance rates, against plain decoding, from batch 1
-- (the weights' bytes bound the step: verifying 5 tokens costs about what 1 does) to batch 256
-- (the verify pass's five rows a sequence make the GEMMs compute-bound: a slowdown). tok/s
-- counts a verify pass's expected yield, (1 − α^5) / (1 − α) tokens a sequence.
--   perfsim run scenarios/speculative_decode.lua --backend none
--   perfsim run scenarios/speculative_decode.lua --backend cuda --set batch=1   (one point, executed)
local opt = options {
  model  = {"model from the zoo (perfsim list models)", "llama-3-8b"},
  batch  = {"sequences decoded together (0: sweep 1, 16, 64, 256)", 0},
  drafts = {"draft tokens a step", 4},
  prompt = {"prompt tokens already in the KV cache", 1024},
  layers = {"transformer layers to execute (0 = all); the rest are scaled", 2},
}

return scenario {
  name = "speculative_decode",
  description = "Speculative decoding in a decode step: the verify pass against plain decoding",
  model = model(opt.model),
  hardware = {"H200", "H100-SXM"},
  workload = decode { batch = opt.batch > 0 and opt.batch or 1, prompt = opt.prompt, new_tokens = 256 },
  stacks = {
    step("plain", "bf16", "flash_attention", "cuda_graphs"),
    step("+speculative 0.7", {speculative = opt.drafts, acceptance = 0.7}),
    step("acceptance 0.4", {acceptance = 0.4}),
  },
  execute = { layers = opt.layers, repeats = 5, warmup = 2 },
  sweep = opt.batch > 0 and nil or { batch = {1, 16, 64, 256} },
}
