-- Two replicas of a tiny serving engine behind each router, executed one a CPU rank
-- (perfsim run --gpus 2 --backend cpu): each rank serves the requests the predicted router sent
-- its replica, rank 0 reports the service and each replica predicted and measured.
return scenario {
  name = "serve_replicas_2",
  model = "tiny-llama", hardware = "H100-SXM",
  parallel = { dp = 2 },
  workload = serve {
    requests = 24, seed = 3,
    arrivals = poisson { rate = 1000 },
    prompt = lengths { dist = "uniform", min = 16, max = 64 },
    output = lengths { dist = "uniform", min = 4, max = 12 },
    prefix = { groups = 2, tokens = 16, share = 0.5 },
  },
  stacks = {
    step("round robin", "flash_attention", "paged_kv", {scheduler = "continuous"}, "prefix_cache"),
    step("least outstanding", {router = "least_outstanding"}),
    step("prefix-aware", {router = "prefix"}),
  },
}
