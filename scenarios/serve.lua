-- Serving Llama-3-8B on one H100: 2,000 requests arriving as a Poisson process, through the
-- serving stack from static batching to continuous batching with paged KV, chunked prefill,
-- prefix caching, CUDA graphs, fp8 weights and an fp8 KV cache. Each step replays the same requests through its engine;
-- the report gives vLLM's latency figures (TTFT, TPOT, ITL, E2E) and goodput under the SLO.
local opt = options {
  model    = {"model from the zoo (perfsim list models)", "llama-3-8b"},
  rate     = {"requests per second (Poisson arrivals)", 20},
  requests = {"requests in the run", 2000},
  prompt   = {"mean prompt tokens (lognormal, at most 4,096)", 512},
  output   = {"mean output tokens (lognormal, at most 2,048)", 256},
  seed     = {"random seed of the traffic (the same seed, the same requests)", 1},
}

return scenario {
  name = "serve",
  description = "Llama-3-8B serving traffic through the serving stack",
  model = model(opt.model),
  hardware = {"H100-SXM", "A100-80GB"},
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = poisson { rate = opt.rate },
    prompt = lengths { dist = "lognormal", mean = opt.prompt, max = 4096 },
    output = lengths { dist = "lognormal", mean = opt.output, max = 2048 },
    -- A quarter of the requests start with one of four 512-token system prompts.
    prefix = { groups = 4, tokens = 512, share = 0.25 },
    slo = { ttft = 0.5, tpot = 0.05 },
  },
  stacks = {
    step("static batching", "bf16", "flash_attention", {scheduler = "static", max_batch = 32}),
    step("+dynamic 10 ms", {scheduler = "dynamic", max_wait = 0.010}),
    step("+continuous", {scheduler = "continuous"}),
    step("+paged_kv", "paged_kv"),
    step("+chunked_prefill", {chunked_prefill = 512}),
    step("+prefix_cache", "prefix_cache"),
    step("+cuda_graphs", "cuda_graphs"),
    step("+fp8", "fp8"),
    step("+fp8_kv", "fp8_kv"),
  },
}
