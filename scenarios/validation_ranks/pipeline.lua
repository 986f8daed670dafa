-- Multi-GPU validation: a pipeline of 2 stages (data parallel over the other ranks), 4
-- micro-batches in the 1F1B order: each stage's measured step holds its bubble, and stage 0
-- holds two micro-batches' activations at once; then interleaved 1F1B with 2 model chunks a
-- stage (stage 0 holds layers 0-5 and 12-17 of 24), its activations passed around the ring of
-- stages. GPT-2 medium, bf16 with flash attention; quick=true: a small GPT-style model.
local opt = options {
  gpus  = {"ranks of the run (perfsim validate --gpus N sets it; even)", 2},
  quick = {"CPU-sized model and sequence (perfsim validate --quick)", false},
}
local m, batch, seq = model("gpt2-medium"), 2, 1024
if opt.quick then
  m = model { name = "gpt-quick", layers = 4, hidden = 256, heads = 4, ffn_hidden = 1024, vocab = 2000, max_seq = 256 }
  batch, seq = 1, 64
end
return scenario {
  name = "pipeline",
  description = "two pipeline stages over 4 micro-batches: 1F1B, then interleaved",
  model = m, hardware = "H100-SXM",
  workload = train { batch = batch, seq = seq, grad_accum = 4 },
  parallel = { pp = 2, dp = math.floor(opt.gpus / 2) },
  stacks = {
    step("PP2 1F1B", "bf16", "flash_attention"),
    step("interleaved ×2", {interleave = 2}),
  },
  execute = { layers = 0, warmup = 2, repeats = opt.quick and 3 or 10 },
}
