-- Serving traffic unlike the shipped scenarios', to check the serving predictions where nothing
-- was tuned: Llama-2-7B (multi-head KV, not Llama-3-8B's grouped one), bursty gamma arrivals
-- (burstiness 0.5: gaps of the same mean, more variable than Poisson), long prompts, and the
-- usual serving stack. Run it executed on a GPU and compare:
--   perfsim run scenarios/validation_serving/unseen_traffic.lua --backend cuda -o unseen.json
local opt = options {
  requests = {"requests in the run", 150},
  rate     = {"mean requests per second", 6},
  prompt   = {"mean prompt tokens (lognormal, at most 3,072)", 1536},
  output   = {"mean output tokens (lognormal, at most 1,024)", 192},
  seed     = {"random seed of the traffic", 3},
}

return scenario {
  name = "unseen_traffic",
  description = "Llama-2-7B, bursty gamma arrivals, long prompts",
  model = model("llama-2-7b"),
  hardware = {"H200", "H100-SXM"},
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = gamma { rate = opt.rate, burstiness = 0.5 },
    prompt = lengths { dist = "lognormal", mean = opt.prompt, max = 3072 },
    output = lengths { dist = "lognormal", mean = opt.output, max = 1024 },
  },
  stacks = {
    step("continuous", "bf16", "flash_attention", {scheduler = "continuous"}, "paged_kv"),
    step("+cuda_graphs", "cuda_graphs"),
  },
}
