-- Serving Llama-3-70B on H200s, the layouts production serving uses: one engine over 4 or 8
-- GPUs (tensor parallelism), an fp8 KV cache, replicas behind a router, and prefill and decode
-- on separate engines (1P1D, 2P2D: each prompt's KV blocks cross NVLink to a decode engine).
-- The traffic is NVIDIA's usual benchmark shape: about 1,000 prompt and 1,000 output tokens.
-- Every step is predicted; the comparison is per GPU (out tok/s over the GPUs the step uses).
local opt = options {
  rate     = {"requests per second (Poisson arrivals)", 8},
  requests = {"requests in the run", 800},
  seed     = {"random seed of the traffic", 1},
}

return scenario {
  name = "serve_70b",
  description = "Llama-3-70B on H200s: TP4, TP8, fp8 KV, replicas, disaggregated prefill/decode",
  model = model("llama-3-70b"),
  hardware = {"H200"},
  parallel = { tp = 4 },
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = poisson { rate = opt.rate },
    prompt = lengths { dist = "normal", mean = 1000, stddev = 100, max = 2000 },
    output = lengths { dist = "normal", mean = 1000, stddev = 100, max = 2000 },
    slo = { ttft = 1.0, tpot = 0.05 },
  },
  stacks = {
    step("TP4", "bf16", "flash_attention", "paged_kv", "cuda_graphs",
         {scheduler = "continuous", chunked_prefill = 2048}),
    step("TP8", {tp = 8}),
    step("TP4 +fp8_kv", {tp = 4}, "fp8_kv"),
    step("2 x TP4", {dp = 2}),
    step("1P1D TP4", {dp = 1, prefill_engines = 1, decode_engines = 1}),
    step("2P2D TP4", {prefill_engines = 2, decode_engines = 2, kv_transfer = "layerwise"}),
  },
  execute = false,
}
