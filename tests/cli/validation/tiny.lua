-- CLI test fixture for `perfsim validate --suite`: a tiny-llama decode step that executes in
-- milliseconds on the CPU backend, through three measured steps.
local opt = options {
  quick = {"CPU-sized run (perfsim validate --quick); this fixture is always tiny", false},
}

return scenario {
  name = "tiny",
  description = "tiny-llama decode for validate tests",
  model = model("tiny-llama"),
  hardware = "H100-SXM",
  workload = decode { batch = 2, prompt = 16, new_tokens = 8 },
  stacks = {
    step("fp32", "fp32"),
    step("+bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
  },
  execute = { layers = 0, repeats = opt.quick and 2 or 3, warmup = 1 },
}
