-- Fixture: replaces the stdlib model zoo when this directory is on the module path.
return {
  { name = "my-model", aliases = {"mine"}, layers = 2, hidden = 128, heads = 4, kv_heads = 2,
    ffn_hidden = 256, vocab = 512, max_seq = 1024, activation = "swiglu", norm = "rmsnorm",
    rope = true },
}
