-- Validation of W8A8 in prefill: Llama-3-8B prompts of 2 × 1024 tokens (two layers executed, the rest scaled),
-- from a CUDA-graphed FlashAttention step in bf16 to the same step with int8 weights (a scale
-- per output channel) and int8 activations (a scale per token) on the int8 tensor cores.
-- `perfsim validate --quick` sets quick=true: a small Llama-style model sized for the CPU backend.
local opt = options {
  quick   = {"CPU-sized model and prompt (perfsim validate --quick)", false},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick)", 0},
}

local m = model("llama-3-8b")
local batch, prompt = 2, 1024
if opt.quick then
  m = model { name = "llama-quick", layers = 2, hidden = 256, heads = 4, kv_heads = 2,
              ffn_hidden = 768, vocab = 2048, max_seq = 512, activation = "swiglu",
              norm = "rmsnorm", rope = true }
  batch, prompt = 1, 96
end

return scenario {
  name = "prefill_w8a8",
  description = "Llama-3-8B prefill, bf16 weights then W8A8",
  model = m,
  hardware = "H200-SXM",
  workload = prefill { batch = batch, prompt = prompt },
  stacks = {
    step("bf16", "bf16", "flash_attention", "fusion", "cuda_graphs"),
    step("+w8a8", "w8a8"),
  },
  execute = { warmup = 2, repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              min_time = opt.quick and 0 or 0.2 },
}
