-- An fp8 KV cache under serving traffic: Llama-2-7B (multi-head KV: 512 KiB a token in bf16),
-- long prompts, bursty gamma arrivals; the same stack with the cache in bf16 and in fp8. Run
-- it executed on a GPU and compare the predicted and measured figures of both steps:
--   perfsim run scenarios/validation_serving/fp8_kv.lua --backend cuda -o fp8_kv.json
local opt = options {
  requests = {"requests in the run", 160},
  rate     = {"mean requests per second", 6},
  prompt   = {"mean prompt tokens (lognormal, at most 3,072)", 1536},
  output   = {"mean output tokens (lognormal, at most 1,024)", 192},
  seed     = {"random seed of the traffic", 5},
}

return scenario {
  name = "fp8_kv_serving",
  description = "Llama-2-7B serving with the KV cache in bf16, then fp8",
  model = model("llama-2-7b"),
  hardware = {"H200", "H100-SXM"},
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = gamma { rate = opt.rate, burstiness = 0.5 },
    prompt = lengths { dist = "lognormal", mean = opt.prompt, max = 3072 },
    output = lengths { dist = "lognormal", mean = opt.output, max = 1024 },
  },
  stacks = {
    step("bf16 KV", "bf16", "flash_attention", {scheduler = "continuous"}, "paged_kv", "cuda_graphs"),
    step("+fp8_kv", "fp8_kv"),
  },
}
