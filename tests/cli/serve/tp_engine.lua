-- Engines split over GPUs: one TP2 engine, then a pipeline of two stages (two batches in
-- flight), then two replicas of TP2 engines.
return scenario {
  model = "tiny-llama", hardware = "H100-SXM", parallel = { tp = 2 },
  workload = serve { requests = 10, arrivals = poisson { rate = 10 } },
  stacks = {
    step("tp2", "bf16", "flash_attention", "paged_kv", {gpu_memory = 0.01}),
    step("pp2", {tp = 1, pp = 2}),
    step("2 x tp2", {dp = 2, tp = 2, pp = 1}),
  },
}
