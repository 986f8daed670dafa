-- Validation: a GPT-2 medium training step (forward, backward, AdamW) through the classic
-- training stack (fp32 -> bf16 AMP -> fused AdamW -> fusion -> recompute), one transformer
-- layer executed. quick=true: a small GPT-style model and 64-token sequences.
local opt = options {
  quick   = {"CPU-sized model and sequence (perfsim validate --quick)", false},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick; more until 0.2 s without quick)", 0},
}

local m = model("gpt2-medium")
local batch, seq = 4, 1024
if opt.quick then
  m = model { name = "gpt-quick", layers = 2, hidden = 256, heads = 4, ffn_hidden = 1024,
              vocab = 2000, max_seq = 256 }
  batch, seq = 2, 64
end

return scenario {
  name = "train",
  description = "GPT-2 medium training step through the classic training stack",
  model = m,
  hardware = "H100-SXM",
  workload = train { batch = batch, seq = seq, grad_accum = 1 },
  stacks = stacks.train_classic,
  execute = { layers = 1, warmup = 2,
              repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              -- short steps get more runs: medians of µs-long kernels settle
              min_time = opt.quick and 0 or 0.2 },
}
