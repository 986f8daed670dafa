-- Speculative decoding with n-gram drafts, from light load to saturation: Llama-3-8B on one
-- H100, plain continuous batching against k drafts a step at two acceptance rates. At light load
-- a decode is bound by streaming the weights and a verify pass of k + 1 rows costs about as
-- much, so every accepted draft is a token for free; as the load rises the batch turns
-- compute-bound and the rejected rows cost what they compute (`perfsim plot` of the sweep draws
-- where each line leaves the others).
local opt = options {
  k        = {"draft tokens a decode step", 4},
  requests = {"requests per point", 400},
}

return scenario {
  name = "serve_speculative",
  description = "speculative decoding (n-gram drafts) against plain decoding as the load rises",
  model = model("llama-3-8b"),
  hardware = "H100-SXM",
  workload = serve {
    requests = opt.requests, seed = 1,
    arrivals = poisson { rate = 1 },
    prompt = lengths { dist = "lognormal", mean = 512, max = 4096 },
    output = lengths { dist = "lognormal", mean = 256, max = 2048 },
    slo = { ttft = 0.5, tpot = 0.05 },
  },
  stacks = {
    step("plain", "bf16", "flash_attention", "paged_kv", "cuda_graphs",
         {scheduler = "continuous", chunked_prefill = 2048}),
    step("+speculative, acceptance 0.7", {speculative = opt.k, acceptance = 0.7}),
    step("acceptance 0.4", {acceptance = 0.4}),
  },
  sweep = { rate = {1, 4, 8, 16, 24} },
}
