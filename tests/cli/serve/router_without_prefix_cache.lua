return scenario {
  model = "tiny-llama", hardware = "H100-SXM", parallel = { dp = 2 },
  workload = serve { requests = 10, arrivals = poisson { rate = 10 } },
  stacks = { step("prefix router", "bf16", "flash_attention", "paged_kv", {router = "prefix"}) },
}
