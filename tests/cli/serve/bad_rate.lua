return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = serve { requests = 10, arrivals = poisson { rate = 0 } },
}
