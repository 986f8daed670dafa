-- Static, dynamic and continuous batching from light load to saturation: the same Llama-3-8B
-- traffic on one H100 at rising request rates. The sweep summary is the latency-throughput
-- curve of each scheduler (`perfsim plot` draws it): where its p99 latency leaves the SLO is
-- the load it sustains.
local opt = options {
  model    = {"model from the zoo (perfsim list models)", "llama-3-8b"},
  requests = {"requests per point", 1000},
}

return scenario {
  name = "serve_batching",
  description = "static vs dynamic vs continuous batching, light load to saturation",
  model = model(opt.model),
  hardware = "H100-SXM",
  workload = serve {
    requests = opt.requests, seed = 1,
    arrivals = poisson { rate = 1 },
    prompt = lengths { dist = "lognormal", mean = 512, max = 4096 },
    output = lengths { dist = "lognormal", mean = 256, max = 2048 },
    slo = { ttft = 0.5, tpot = 0.05 },
  },
  stacks = {
    step("static", "bf16", "flash_attention", "paged_kv", {scheduler = "static", max_batch = 32}),
    step("dynamic 20 ms", {scheduler = "dynamic", max_batch = 32, max_wait = 0.020}),
    step("continuous", {scheduler = "continuous", chunked_prefill = 2048}),
  },
  sweep = { rate = {1, 2, 4, 8, 16, 24, 32, 48} },
}
