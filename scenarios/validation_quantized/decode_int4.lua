-- Validation of int4 weight-only weights in decode: Llama-3-8B steps at batch 1 (two layers
-- executed and the rest scaled, as every validation scenario does; lm_head runs whole),
-- from a CUDA-graphed FlashAttention step in bf16 to the same step with int4 weights in groups
-- of 128 with zero points (AWQ's and GPTQ's usual layout).
-- `perfsim validate --quick` sets quick=true: a small Llama-style model sized for the CPU backend.
local opt = options {
  quick   = {"CPU-sized model and context (perfsim validate --quick)", false},
  batch   = {"sequences decoded together", 1},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick)", 0},
}

local m = model("llama-3-8b")
local prompt, new_tokens = 1024, 256
if opt.quick then
  m = model { name = "llama-quick", layers = 2, hidden = 256, heads = 4, kv_heads = 2,
              ffn_hidden = 768, vocab = 2048, max_seq = 512, activation = "swiglu",
              norm = "rmsnorm", rope = true }
  prompt, new_tokens = 96, 32
end

return scenario {
  name = "decode_int4",
  description = "Llama-3-8B decode step, bf16 weights then int4 weight-only",
  model = m,
  hardware = "H200-SXM",
  workload = decode { batch = opt.batch, prompt = prompt, new_tokens = new_tokens },
  stacks = {
    step("bf16", "bf16", "flash_attention", "fusion", "cuda_graphs"),
    step("+int4_weights", {int4_weights = 128}),
  },
  execute = { warmup = 2, repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              min_time = opt.quick and 0 or 0.2 },
}
