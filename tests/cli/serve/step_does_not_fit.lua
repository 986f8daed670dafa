-- Llama-3-70B on one H200: in bf16 its 141 GB of weights leave no room for a KV cache; fp8
-- weights do. The first step is noted, the second served.
return scenario {
  model = "llama-3-70b", hardware = "H200",
  workload = serve { requests = 40, arrivals = poisson { rate = 2 }, prompt = 256, output = 32 },
  stacks = {
    step("bf16", "bf16", "flash_attention", "paged_kv", {scheduler = "continuous"}),
    step("+fp8", "fp8"),
  },
}
