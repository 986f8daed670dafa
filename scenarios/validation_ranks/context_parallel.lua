-- Multi-GPU validation: context parallelism over 2 ranks (data parallel over the others): each
-- rank holds two of the four chunks of every sequence (causal load balance) and the K/V blocks
-- pass around the ring. A Llama-style model of 1.2 B parameters on 4096-token sequences, bf16
-- with flash attention; quick=true: tiny-llama on 64 tokens.
local opt = options {
  gpus  = {"ranks of the run (perfsim validate --gpus N sets it; even)", 2},
  quick = {"CPU-sized model and sequence (perfsim validate --quick)", false},
}
local m, batch, seq = model("llama-2-7b", { name = "llama-1b", layers = 16, hidden = 2048, heads = 16, kv_heads = 8,
                                           ffn_hidden = 5632, max_seq = 8192 }), 1, 4096
if opt.quick then m, batch, seq = model("tiny-llama"), 1, 64 end
return scenario {
  name = "context_parallel",
  description = "ring attention over 2 ranks",
  model = m, hardware = "H100-SXM",
  workload = train { batch = batch, seq = seq },
  parallel = { cp = 2, dp = math.floor(opt.gpus / 2) },
  stacks = { step("CP2", "bf16", "flash_attention") },
  execute = { layers = 0, warmup = 2, repeats = opt.quick and 3 or 10 },
}
