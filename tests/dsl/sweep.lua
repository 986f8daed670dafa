-- Fixture: a sweep over hardware and batch (2 x 3 points).
return scenario {
  name = "sweep",
  model = model("tiny-llama"),
  hardware = "H100",
  workload = decode { batch = 1, prompt = 32, new_tokens = 16 },
  sweep = { batch = {1, 8, 32}, hardware = {"h100", "a100"} },
}
