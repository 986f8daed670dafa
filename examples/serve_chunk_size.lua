-- Chunked prefill's token budget against latency: the same Llama-3-8B traffic on one H100 with
-- chunks of 256 to 8,192 tokens per engine step, at a moderate and a heavy load. Small chunks
-- keep decodes flowing (low TPOT) but stretch each prompt over more steps (higher TTFT); large
-- ones do the opposite. A plain script: it prints one table (prediction only, instant).
local opt = options {
  model    = {"model from the zoo (perfsim list models)", "llama-3-8b"},
  requests = {"requests per run", 1000},
}

local chunks = {256, 512, 1024, 2048, 4096, 8192}
local rates = {8, 24}

print(string.format("Chunked prefill on %s, H100-SXM: %d requests a run, lognormal prompts 1,024 and outputs 256",
                    opt.model, opt.requests))
print(string.format("%6s  %6s  %9s  %9s  %9s  %9s  %8s  %7s", "rate", "chunk", "TTFT p50", "TTFT p99",
                    "TPOT p50", "TPOT p99", "out tok/s", "SLO met"))
for _, rate in ipairs(rates) do
  for _, chunk in ipairs(chunks) do
    local rows = perfsim.predict {
      model = model(opt.model), hardware = "H100-SXM",
      workload = serve {
        requests = opt.requests, seed = 1, arrivals = poisson { rate = rate },
        prompt = lengths { dist = "lognormal", mean = 1024, max = 4096 },
        output = lengths { dist = "lognormal", mean = 256, max = 1024 },
        slo = { ttft = 1.0, tpot = 0.05 },
      },
      stacks = {
        step("vLLM-like", "bf16", "flash_attention", "paged_kv", "cuda_graphs",
             {scheduler = "continuous", chunked_prefill = chunk}),
      },
    }
    local r = rows[1]
    print(string.format("%6g  %6d  %6.0f ms  %6.0f ms  %6.1f ms  %6.1f ms  %8.0f  %6.1f%%", rate, chunk,
                        r.ttft.p50 * 1e3, r.ttft.p99 * 1e3, r.tpot.p50 * 1e3, r.tpot.p99 * 1e3,
                        r.output_tokens_per_s, r.slo_attainment * 100))
  end
end
