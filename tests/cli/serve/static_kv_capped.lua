-- Static batches of 64 on an A100-40GB without paged_kv: every sequence reserves max_seq
-- tokens of KV, so the pool holds fewer sequences than a batch asks for, and the report says so.
return scenario {
  model = "llama-3-8b", hardware = "A100-40GB",
  workload = serve { requests = 200, arrivals = poisson { rate = 50 }, prompt = 256, output = 64 },
  stacks = { step("static 64", "bf16", "flash_attention", {scheduler = "static", max_batch = 64}) },
}
