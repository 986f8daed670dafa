-- One tiny serving engine split over two CPU ranks (tensor parallelism: each rank holds half the
-- heads and the MLP, the all-reduces inside every engine step), perfsim run --gpus 2 --backend
-- cpu: rank 0 schedules and reports predicted against measured; then with cuda_graphs, its
-- decode steps sent with their capture size and run padded to it on every rank.
return scenario {
  name = "serve_tp_2",
  model = "tiny-llama", hardware = "H100-SXM",
  parallel = { tp = 2 },
  workload = serve {
    requests = 16, seed = 5,
    arrivals = poisson { rate = 200 },
    prompt = lengths { dist = "uniform", min = 16, max = 64 },
    output = lengths { dist = "uniform", min = 4, max = 12 },
  },
  stacks = {
    step("TP2", "flash_attention", "paged_kv", {scheduler = "continuous"}),
    step("TP2 graphed", "cuda_graphs"),
  },
}
