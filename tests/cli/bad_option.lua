-- CLI test fixture: a scenario whose workload names a field that does not exist.
return scenario {
  name = "bad_option",
  model = model("tiny-llama"),
  hardware = "H100-SXM",
  workload = decode { batch = 1, prompt = 16, nwe_tokens = 8 },
}
