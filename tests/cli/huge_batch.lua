-- CLI test fixture: a decode batch far beyond any real run (1e12 sequences), refused with one
-- error line naming the field and the bound instead of a report of overflowed sizes.
return scenario {
  name = "huge_batch",
  description = "decode batch of 1e12 sequences (refused)",
  model = model("tiny-llama"),
  hardware = {"H100-SXM"},
  workload = decode { batch = 1e12, prompt = 16, new_tokens = 8 },
}
