-- Validation: Llama-3-8B prefill of a 2048-token prompt, materialized attention (scores and
-- probabilities in memory) against FlashAttention, then replayed from a CUDA graph; one
-- transformer layer executed. quick=true: a small Llama-style model and a 128-token prompt.
local opt = options {
  quick   = {"CPU-sized model and prompt (perfsim validate --quick)", false},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick; more until 0.2 s without quick)", 0},
}

local m = model("llama-3-8b")
local prompt = 2048
if opt.quick then
  m = model { name = "llama-quick", layers = 2, hidden = 256, heads = 4, kv_heads = 2,
              ffn_hidden = 704, vocab = 2000, max_seq = 512, activation = "swiglu",
              norm = "rmsnorm", rope = true }
  prompt = 128
end

return scenario {
  name = "prefill",
  description = "Llama-3-8B prefill: materialized attention, FlashAttention, CUDA graphs",
  model = m,
  hardware = "H100-SXM",
  workload = prefill { batch = 1, prompt = prompt, new_tokens = 128 },
  stacks = {
    step("materialized bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+cuda_graphs", "cuda_graphs"),
  },
  execute = { layers = 1, warmup = 2,
              repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              -- short steps get more runs: medians of µs-long kernels settle
              min_time = opt.quick and 0 or 0.2 },
}
