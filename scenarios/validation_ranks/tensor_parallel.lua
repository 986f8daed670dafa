-- Multi-GPU validation: tensor parallelism over every rank of the run (Megatron's column and
-- row splits, vocabulary-parallel embedding and loss), then with sequence parallelism (norms and
-- residuals on a share of the tokens, all-gathers and reduce-scatters instead of all-reduces).
-- GPT-2 medium, bf16 with flash attention; quick=true: a small GPT-style model.
local opt = options {
  gpus  = {"ranks of the run (perfsim validate --gpus N sets it)", 2},
  quick = {"CPU-sized model and sequence (perfsim validate --quick)", false},
}
local m, batch, seq = model("gpt2-medium"), 8, 1024
if opt.quick then
  m = model { name = "gpt-quick", layers = 2, hidden = 256, heads = 4, ffn_hidden = 1024, vocab = 2000, max_seq = 256 }
  batch, seq = 2, 64
end
return scenario {
  name = "tensor_parallel",
  description = "tensor parallelism over every rank, then with sequence parallelism",
  model = m, hardware = "H100-SXM",
  workload = train { batch = batch, seq = seq },
  parallel = { tp = opt.gpus },
  stacks = {
    step("TP", "bf16", "flash_attention"),
    step("+SP", {sp = 1}),
  },
  execute = { layers = 0, warmup = 2, repeats = opt.quick and 3 or 10 },
}
