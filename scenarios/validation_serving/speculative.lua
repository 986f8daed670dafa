-- Speculative decoding (n-gram drafts) under light, heavy and saturated load: Llama-3-8B, plain continuous
-- batching against 4 drafts a step at acceptances 0.7 and 0.4. The drafts cost no device work,
-- so the executed engine runs every verify pass for real (k + 1 rows a sequence, each row's
-- logits) with the accepted lengths the prediction drew. Run it executed on a GPU and compare
-- the predicted and measured figures of each step, at both loads:
--   perfsim run scenarios/validation_serving/speculative.lua --backend cuda --set load=light
--   perfsim run scenarios/validation_serving/speculative.lua --backend cuda --set load=heavy
--   perfsim run scenarios/validation_serving/speculative.lua --backend cuda --set load=saturated
local opt = options {
  load = {"light (2 requests/s: decodes bound by the weights), heavy (24 requests/s) or saturated (96 requests/s: verify passes bound by compute)", "light"},
  k    = {"draft tokens a decode step", 4},
  seed = {"random seed of the traffic", 3},
}
assert(opt.load == "light" or opt.load == "heavy" or opt.load == "saturated", "load: light, heavy or saturated")
local light = opt.load == "light"

return scenario {
  name = "speculative_serving",
  description = "n-gram speculative decoding against plain decoding, light, heavy or saturated load",
  model = model("llama-3-8b"),
  hardware = {"H200", "H100-SXM"},
  workload = serve {
    requests = light and 60 or (opt.load == "heavy" and 160 or 320), seed = opt.seed,
    arrivals = poisson { rate = light and 2 or (opt.load == "heavy" and 24 or 96) },
    prompt = lengths { dist = "lognormal", mean = 512, max = 2048 },
    output = lengths { dist = "lognormal", mean = 256, max = 1024 },
  },
  stacks = {
    step("plain", "bf16", "flash_attention", "paged_kv", "cuda_graphs",
         {scheduler = "continuous", chunked_prefill = 2048}),
    step("+speculative 0.7", {speculative = opt.k, acceptance = 0.7}),
    step("acceptance 0.4", {acceptance = 0.4}),
  },
}
