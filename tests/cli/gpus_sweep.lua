-- A gpus sweep: the summary's scaling efficiency, tokens/s per GPU and MFU columns.
return scenario {
  name = "gpus_sweep",
  model = model("llama-3-8b"),
  hardware = "H100-SXM",
  workload = train { batch = 1, seq = 4096, grad_accum = 4 },
  parallel = { zero = 3 },
  stacks = { step("bf16", "bf16", "flash_attention") },
  sweep = { gpus = {1, 2, 8, 64, 512} },
  execute = { enabled = false },
}
