-- An acceptance rate without draft tokens to accept: refused, naming the step.
return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = decode { batch = 2, prompt = 32, new_tokens = 8 },
  stacks = { step("bf16", "bf16"), step("+acceptance", {acceptance = 0.7}) },
}
