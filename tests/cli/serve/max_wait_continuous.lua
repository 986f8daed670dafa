return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = serve { requests = 10, arrivals = poisson { rate = 10 } },
  stacks = {
    step("dynamic", "bf16", {scheduler = "dynamic", max_wait = 0.01}),
    step("continuous", {scheduler = "continuous", max_wait = 0.01}),
  },
}
