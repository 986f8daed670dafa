-- Validation: Llama-3-8B decode through the classic serving stack (bf16 -> FlashAttention ->
-- CUDA graphs -> fp8 -> batching to 32 -> paged KV cache), one transformer layer executed and
-- the rest scaled.
-- `perfsim validate --quick` sets quick=true: a small Llama-style model with every decode op,
-- sized for the CPU backend.
local opt = options {
  quick   = {"CPU-sized model and context (perfsim validate --quick)", false},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick; more until 0.2 s without quick)", 0},
}

local m = model("llama-3-8b")
local prompt, new_tokens = 1024, 256
if opt.quick then
  m = model { name = "llama-quick", layers = 2, hidden = 256, heads = 4, kv_heads = 2,
              ffn_hidden = 704, vocab = 2000, max_seq = 512, activation = "swiglu",
              norm = "rmsnorm", rope = true }
  prompt, new_tokens = 96, 32
end

return scenario {
  name = "decode",
  description = "Llama-3-8B decode step through the classic serving stack",
  model = m,
  hardware = "H100-SXM",
  workload = decode { batch = 1, prompt = prompt, new_tokens = new_tokens },
  stacks = stacks.decode_classic,
  execute = { layers = 1, warmup = 2,
              repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              -- short steps get more runs: medians of µs-long kernels settle
              min_time = opt.quick and 0 or 0.2 },
}
