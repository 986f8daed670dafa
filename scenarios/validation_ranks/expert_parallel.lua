-- Multi-GPU validation: a mixture-of-experts layer stack with its experts split over every
-- rank (expert parallelism: all-to-alls carry each expert's tokens to the rank holding it and
-- the outputs back), the dense parts data parallel. A Llama-style model with 8 experts of top 2,
-- bf16 with flash attention; quick=true: tiny-moe.
local opt = options {
  gpus  = {"ranks of the run (perfsim validate --gpus N sets it; divides 8)", 2},
  quick = {"CPU-sized model and sequence (perfsim validate --quick)", false},
}
local m, batch, seq = model("llama-2-7b", { name = "moe-1b", layers = 8, hidden = 1024, heads = 16, kv_heads = 8,
                                           ffn_hidden = 2816, experts = 8, top_k = 2 }), 4, 1024
if opt.quick then m, batch, seq = model("tiny-moe"), 2, 64 end
return scenario {
  name = "expert_parallel",
  description = "experts split over every rank, all-to-all dispatch",
  model = m, hardware = "H100-SXM",
  workload = train { batch = batch, seq = seq },
  parallel = { dp = opt.gpus, ep = opt.gpus },
  stacks = { step("EP", "bf16", "flash_attention") },
  execute = { layers = 0, warmup = 2, repeats = opt.quick and 3 or 10 },
}
