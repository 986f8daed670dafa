-- Serving over two GPUs, executed on two ranks (perfsim run --gpus 2): Llama-3-8B as one engine
-- split over both GPUs (tensor parallelism, the all-reduces inside every engine step), as two
-- replicas behind each router, or as a prefill engine and a decode engine (1P1D, each prompt's
-- KV sent from one GPU to the other), under bursty traffic with shared prefixes. Run on a
-- machine of two GPUs and compare predicted and measured:
--   perfsim run scenarios/validation_serving/two_gpus.lua --backend cuda --gpus 2 --set layout=tp2
--   perfsim run scenarios/validation_serving/two_gpus.lua --backend cuda --gpus 2 --set layout=replicas
--   perfsim run scenarios/validation_serving/two_gpus.lua --backend cuda --gpus 2 --set layout=pd
-- (--set closed=true: closed-loop clients instead, for the TP2 engine).
local opt = options {
  layout   = {"tp2 (one engine over both GPUs), replicas (two engines behind each router) or pd (1P1D)", "tp2"},
  requests = {"requests in the run", 240},
  rate     = {"mean requests per second", 12},
  closed   = {"closed-loop clients instead of gamma arrivals", false},
  users    = {"closed-loop clients", 16},
  seed     = {"random seed of the traffic", 7},
  graphs   = {"decode steps replayed from CUDA graphs (cuda_graphs in the stack)", true},
}
assert(opt.layout == "tp2" or opt.layout == "replicas" or opt.layout == "pd", "layout: tp2, replicas or pd")

local graphs = opt.graphs and "cuda_graphs" or {}
local base = {"bf16", "flash_attention", {scheduler = "continuous", chunked_prefill = 2048}, "paged_kv", graphs,
              "prefix_cache"}
local stacks
if opt.layout == "tp2" then
  stacks = { step("TP2", unpack(base)) }
elseif opt.layout == "pd" then
  stacks = {
    step("1P1D", "bf16", "flash_attention",
         {scheduler = "continuous", chunked_prefill = 2048, prefill_engines = 1, decode_engines = 1},
         "paged_kv", graphs, "prefix_cache"),
    step("+layerwise KV", {kv_transfer = "layerwise"}),
  }
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
  parallel = opt.layout == "tp2" and { tp = 2 } or opt.layout == "replicas" and { dp = 2 } or nil,
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = opt.closed and closed { users = opt.users, think = 0.5 } or gamma { rate = opt.rate, burstiness = 0.5 },
    prompt = lengths { dist = "lognormal", mean = 1024, max = 4096 },
    output = lengths { dist = "lognormal", mean = 192, max = 1024 },
    prefix = { groups = 8, tokens = 512, share = 0.5 },
  },
  stacks = stacks,
}
