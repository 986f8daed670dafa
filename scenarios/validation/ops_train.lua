-- Validation, op shapes off the calibration grid (training): a Llama-style model of hidden
-- 2304 (18 heads of 128, GQA with 6 KV heads, SwiGLU 6144, vocabulary 32003) training on
-- 3 sequences of 1000 tokens fed from host memory: every backward kernel (rmsnorm, SwiGLU,
-- RoPE, materialized and flash attention, embedding scatter), cross-entropy, AdamW unfused and
-- fused, host-to-device copies from pageable and pinned memory. quick=true: CPU size.
local opt = options {
  quick   = {"CPU-sized model and sequence (perfsim validate --quick)", false},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick; more until 0.2 s without quick)", 0},
}

local dims = { name = "llama-odd-2304", layers = 20, hidden = 2304, heads = 18, kv_heads = 6,
               ffn_hidden = 6144, vocab = 32003, max_seq = 2048 }
local seq = 1000
if opt.quick then
  dims = { name = "llama-odd-quick", layers = 2, hidden = 288, heads = 6, kv_heads = 2,
           ffn_hidden = 736, vocab = 1500, max_seq = 256 }
  seq = 100
end
dims.activation, dims.norm, dims.rope = "swiglu", "rmsnorm", true

return scenario {
  name = "ops_train",
  description = "Training ops at odd shapes (hidden 2304, batch 3, seq 1000), inputs on the host",
  model = model(dims),
  hardware = "H100-SXM",
  workload = train { batch = 3, seq = seq, grad_accum = 1 },
  host_data = true,
  stacks = {
    step("bf16 AMP", "bf16"),
    step("+pinned_memory", "pinned_memory"),
    step("+flash_attention", "flash_attention"),
    step("+fused_optimizer", "fused_optimizer"),
    step("+fusion", "fusion"),
  },
  execute = { layers = 1, warmup = 2,
              repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              -- short steps get more runs: medians of µs-long kernels settle
              min_time = opt.quick and 0 or 0.2 },
}
