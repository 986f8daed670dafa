-- Fixture: a training step with the named classic stack and a custom model table.
return scenario {
  model = model { name = "mini", layers = 4, hidden = 256, heads = 8, ffn_hidden = 1024,
                  vocab = 1000, max_seq = 512 },
  hardware = "A100",
  workload = train { batch = 2, seq = 512, grad_accum = 4 },
  stacks = stacks.train_classic,
  execute = false,
}
