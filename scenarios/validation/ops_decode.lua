-- Validation, op shapes off the calibration grid (decode): a Llama-style model of hidden 3200
-- (25 heads of 128, GQA with 5 KV heads, SwiGLU 8640, vocabulary 50000) decoding 3 sequences
-- at context 1100: GEMMs with m = 3, KV-cache appends, decode attention materialized and
-- flash, fused add+rmsnorm, and the paged KV cache (32-row pages). quick=true keeps the odd proportions at CPU size.
local opt = options {
  quick   = {"CPU-sized model and context (perfsim validate --quick)", false},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick; more until 0.2 s without quick)", 0},
}

local dims = { name = "llama-odd-3200", layers = 26, hidden = 3200, heads = 25, kv_heads = 5,
               ffn_hidden = 8640, vocab = 50000, max_seq = 4096 }
local prompt, new_tokens = 1000, 200
if opt.quick then
  dims = { name = "llama-odd-quick", layers = 2, hidden = 320, heads = 5, kv_heads = 1,
           ffn_hidden = 864, vocab = 1500, max_seq = 512 }
  prompt, new_tokens = 100, 20
end
dims.activation, dims.norm, dims.rope = "swiglu", "rmsnorm", true

return scenario {
  name = "ops_decode",
  description = "Decode ops at odd shapes (hidden 3200, batch 3, context 1100)",
  model = model(dims),
  hardware = "H100-SXM",
  workload = decode { batch = 3, prompt = prompt, new_tokens = new_tokens },
  stacks = {
    step("bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+fusion", "fusion"),
    step("+cuda_graphs", "cuda_graphs"),
    step("+paged_kv", {paged_kv = 32}),
  },
  execute = { layers = 1, warmup = 2,
              repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              -- short steps get more runs: medians of µs-long kernels settle
              min_time = opt.quick and 0 or 0.2 },
}
