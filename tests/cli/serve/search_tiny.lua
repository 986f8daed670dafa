-- A serving layout search on 4 GPUs of a tiny Llama: engines of 1, 2 or 4 GPUs, replicas or
-- prefill/decode splits, and the scheduler's max_batch and chunked_prefill. A KV pool of a few
-- thousand tokens per GPU and tight bounds, so the limiters differ.
return scenario {
  model = "tiny-llama", hardware = "H100-SXM", parallel = { tp = 2, dp = 2 },
  workload = serve {
    requests = 120, arrivals = poisson { rate = 8000 }, prompt = 200, output = 40,
    slo = { ttft = 0.005, tpot = 0.0009 },
  },
  stacks = {
    step("engine", "bf16", "flash_attention", "paged_kv", {scheduler = "continuous", gpu_memory = 0.0005}),
  },
}
