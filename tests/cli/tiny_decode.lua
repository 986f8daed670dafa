-- CLI test fixture: a decode step of the tiny test model, small enough to execute in
-- milliseconds, with one step (fp8) the CPU backend cannot run.
return scenario {
  name = "tiny_decode",
  description = "tiny-llama decode step for CLI tests",
  model = model("tiny-llama"),
  hardware = {"H100-SXM", "A100-80GB"},
  workload = decode { batch = 2, prompt = 16, new_tokens = 8 },
  stacks = {
    step("fp32", "fp32"),
    step("+bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+fp8", "fp8"),
  },
  execute = { layers = 0, repeats = 2, warmup = 1 },
}
