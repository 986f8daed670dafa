return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = serve { requests = 4, arrivals = closed { users = 2, think = 0.1 }, prompt = 16, output = 2 },
  stacks = { step("1P1D", "bf16", "flash_attention", "paged_kv", {prefill_engines = 1, decode_engines = 1}) },
}
