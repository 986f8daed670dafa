-- Serving over two GPUs, executed on two ranks (perfsim run --gpus 2): Llama-3-8B as one engine
-- split over both GPUs (tensor parallelism, the all-reduces inside every engine step), or as two
-- replicas behind each router, under bursty traffic with shared prefixes. Run on a machine of
-- two GPUs and compare predicted and measured:
--   perfsim run scenarios/validation_serving/two_gpus.lua --backend cuda --gpus 2 --set layout=tp2
--   perfsim run scenarios/validation_serving/two_gpus.lua --backend cuda --gpus 2 --set layout=replicas
-- (--set closed=true: closed-loop clients instead, for the TP2 engine).
local opt = options {
  layout   = {"tp2 (one engine over both GPUs) or replicas (two engines behind each router)", "tp2"},
  requests = {"requests in the run", 240},
  rate     = {"mean requests per second", 12},
  closed   = {"closed-loop clients instead of gamma arrivals", false},
  users    = {"closed-loop clients", 16},
  seed     = {"random seed of the traffic", 7},
}
assert(opt.layout == "tp2" or opt.layout == "replicas", "layout: tp2 or replicas")

local base = {"bf16", "flash_attention", {scheduler = "continuous", chunked_prefill = 2048}, "paged_kv",
              "cuda_graphs", "prefix_cache"}
local stacks
if opt.layout == "tp2" then
  stacks = { step("TP2", unpack(base)) }
else
  stacks = {
    step("2 replicas, round robin", unpack(base)),
    step("least outstanding", {router = "least_outstanding"}),
    step("prefix-aware", {router = "prefix"}),
  }
end

return scenario {
  name = "serve_two_gpus",
  description = "Llama-3-8B on two GPUs: one TP2 engine, or two replicas behind each router",
  model = model("llama-3-8b"),
  hardware = {"H200"},
  parallel = opt.layout == "tp2" and { tp = 2 } or { dp = 2 },
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = opt.closed and closed { users = opt.users, think = 0.5 } or gamma { rate = opt.rate, burstiness = 0.5 },
    prompt = lengths { dist = "lognormal", mean = 1024, max = 4096 },
    output = lengths { dist = "lognormal", mean = 192, max = 1024 },
    prefix = { groups = 8, tokens = 512, share = 0.5 },
  },
  stacks = stacks,
}
