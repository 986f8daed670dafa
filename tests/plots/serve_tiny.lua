-- Charts test fixture: a serving run of tiny-llama on an H100, 40 requests, static batching then
-- continuous batching over paged KV. --set sweep=true predicts it at three arrival rates (the
-- latency-vs-load chart); --set speculative=true adds a step decoding speculatively (3 drafts,
-- acceptance 0.6: the speculative decoding chart).
local opt = options {
  sweep = {"sweep the arrival rate", false},
  speculative = {"add a step decoding speculatively", false},
}
local steps = {
  step("static", "bf16", "flash_attention", {scheduler = "static", max_batch = 4}),
  step("+continuous", {scheduler = "continuous"}, "paged_kv"),
}
if opt.speculative then steps[#steps + 1] = step("+speculative", {speculative = 3, acceptance = 0.6}) end

return scenario {
  name = "serve_tiny",
  model = model "tiny-llama",
  hardware = "H100-SXM",
  workload = serve {
    requests = 40, seed = 5,
    arrivals = poisson { rate = 200 },
    prompt = lengths { dist = "uniform", min = 8, max = 64 },
    output = lengths { dist = "uniform", min = 2, max = 16 },
  },
  stacks = steps,
  sweep = opt.sweep and { rate = {100, 1000, 10000} } or nil,
}
