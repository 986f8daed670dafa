-- Multi-GPU validation: data parallelism over every rank of the run — DDP (gradient buckets
-- all-reduced during backward), ZeRO-1 and FSDP (ZeRO-3: weights gathered a layer ahead,
-- gradients reduce-scattered), then FSDP's step captured as one CUDA graph, its collectives
-- inside. GPT-2 medium, bf16 with flash attention. quick=true: a small
-- GPT-style model for CPU ranks. perfsim validate --gpus N sets gpus.
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
  name = "data_parallel",
  description = "DDP, ZeRO-1 and FSDP over every rank",
  model = m, hardware = "H100-SXM",
  workload = train { batch = batch, seq = seq },
  parallel = { dp = opt.gpus },
  stacks = {
    step("DDP", "bf16", "flash_attention"),
    step("ZeRO-1", {zero = 1}),
    step("FSDP", {zero = 3}),
    step("+CUDA graphs", "cuda_graphs"),
  },
  execute = { layers = 0, warmup = 2, repeats = opt.quick and 3 or 10 },
}
