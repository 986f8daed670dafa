return scenario {
  model = "tiny-llama", hardware = "H100-SXM", parallel = { cp = 2 },
  workload = serve { requests = 10, arrivals = poisson { rate = 10 } },
  stacks = { step("cp2", "bf16", "flash_attention") },
}
