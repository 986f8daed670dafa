-- Serving Llama-3-8B on eight H100s as eight replicas behind a router: chat traffic where most
-- requests start with one of 400 long system prompts (agents' tools and instructions), at a
-- rate round robin cannot hold. Round robin spreads each system prompt over every replica's
-- prefix cache; least-outstanding routing balances the queues; prefix-aware routing sends each
-- request where its prompt is cached (SGLang's cache-aware router, llm-d's prefix scorer).
-- An fp8 KV cache then doubles what each replica can hold.
local opt = options {
  replicas = {"engines behind the router, one GPU each", 8},
  rate     = {"requests per second (Poisson arrivals)", 120},
  requests = {"requests in the run", 6000},
  seed     = {"random seed of the traffic", 1},
}

return scenario {
  name = "serve_replicas",
  description = "Llama-3-8B on replicas behind a router, prefix-heavy chat traffic",
  model = model("llama-3-8b"),
  hardware = {"H100-SXM"},
  parallel = { dp = opt.replicas },
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = poisson { rate = opt.rate },
    prompt = lengths { dist = "lognormal", mean = 2560, max = 8000 },
    output = lengths { dist = "lognormal", mean = 192, max = 1024 },
    -- Four requests in five start with one of 400 system prompts of 2,048 tokens: 820k tokens of
    -- prefixes, more than one replica's KV cache holds beside its running requests.
    prefix = { groups = 400, tokens = 2048, share = 0.8 },
    slo = { ttft = 1.0, tpot = 0.05 },
  },
  stacks = {
    step("round robin", "bf16", "flash_attention", "paged_kv", "cuda_graphs",
         {scheduler = "continuous", chunked_prefill = 2048}, "prefix_cache"),
    step("least outstanding", {router = "least_outstanding"}),
    step("prefix-aware", {router = "prefix"}),
    step("+fp8_kv", "fp8_kv"),
  },
  execute = false,
}
