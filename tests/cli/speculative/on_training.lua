-- Speculation has no decode step to verify in a training step: refused, naming the step.
return scenario {
  model = "tiny-llama", hardware = "H100-SXM",
  workload = train { batch = 2, seq = 64 },
  stacks = { step("fp32"), step("+spec", {speculative = 4, acceptance = 0.7}) },
}
