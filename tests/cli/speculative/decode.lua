-- Speculative decoding in a decode step: each step verifies 4 draft tokens per sequence in one
-- pass of 5, at two acceptance rates, against plain decoding. tok/s counts the expected yield.
return scenario {
  name = "speculative_decode",
  model = "tiny-llama", hardware = {"H100-SXM"},
  workload = decode { batch = 4, prompt = 96, new_tokens = 32 },
  stacks = {
    step("plain", "bf16", "flash_attention"),
    step("+speculative 0.7", {speculative = 4, acceptance = 0.7}),
    step("acceptance 0.4", {acceptance = 0.4}),
  },
}
