-- CLI test fixture: a run that fails after its first step. The hardware has no fp32 unit, so
-- the bf16 step is priced and the fp32 step that follows cannot be; -o must write nothing.
return scenario {
  name = "fails_mid_run",
  model = model("tiny-llama"),
  hardware = {
    name = "bf16-only", peak_flops = { bf16 = 100e12 }, memory_bytes = 16e9,
    memory_bandwidth = 1e12,
  },
  workload = decode { batch = 1, prompt = 16, new_tokens = 8 },
  stacks = { step("bf16", "bf16"), step("then fp32", "fp32") },
  execute = false,
}
