-- Closed-loop clients instead of an open arrival process: each of 24 users sends its next
-- request half a second after its last one finished, so the load follows the engine's speed.
-- Llama-2-7B with the continuous-batching stack; run it executed on a GPU and compare:
--   perfsim run scenarios/validation_serving/closed_users.lua --backend cuda -o closed.json
local opt = options {
  requests = {"requests in the run", 150},
  users    = {"concurrent clients", 24},
  think    = {"seconds a client waits between a response and its next request", 0.5},
  seed     = {"random seed of the traffic", 5},
}

return scenario {
  name = "closed_users",
  description = "Llama-2-7B, 24 closed-loop users",
  model = model("llama-2-7b"),
  hardware = {"H200", "H100-SXM"},
  workload = serve {
    requests = opt.requests, seed = opt.seed,
    arrivals = closed { users = opt.users, think = opt.think },
    prompt = lengths { dist = "lognormal", mean = 512, max = 2048 },
    output = lengths { dist = "lognormal", mean = 256, max = 1024 },
  },
  stacks = {
    step("continuous+graphs", "bf16", "flash_attention", {scheduler = "continuous"}, "paged_kv", "cuda_graphs"),
  },
}
