return scenario {
  model = "tiny-llama", hardware = "H100-SXM", parallel = { tp = 2 },
  workload = serve { requests = 10, arrivals = poisson { rate = 10 } },
  stacks = { step("tp2", "bf16", "flash_attention") },
}
