-- A stack whose first two steps do not fit one H100 (Llama-3-70B in bf16) and whose last does
-- (fp8 weights): the stack chart must draw the first two apart, not as speedups.
return scenario {
  name = "unfit",
  model = model("llama-3-70b"),
  hardware = "H100-SXM",
  workload = decode { batch = 8, prompt = 512, new_tokens = 128 },
  stacks = { step("bf16", "bf16"), step("+flash_attention", "flash_attention"), step("+fp8", "fp8") },
  execute = { enabled = false },
}
