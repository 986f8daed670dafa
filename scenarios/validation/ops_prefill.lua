-- Validation, op shapes off the calibration grid (prefill): a GPT-style model of hidden 2304
-- (18 heads of 128, GELU MLP 6912, LayerNorm, learned positions, vocabulary 50257) prefilling
-- 3 prompts of 1000 tokens: GEMMs with m = 3000, materialized and flash attention over 1000
-- positions, fused add+layernorm, last-token slicing. quick=true: the same shape family at CPU
-- size.
local opt = options {
  quick   = {"CPU-sized model and prompt (perfsim validate --quick)", false},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick; more until 0.2 s without quick)", 0},
}

local m = model { name = "gpt-odd-2304", layers = 20, hidden = 2304, heads = 18,
                  ffn_hidden = 6912, vocab = 50257, max_seq = 2048 }
local prompt = 1000
if opt.quick then
  m = model { name = "gpt-odd-quick", layers = 2, hidden = 288, heads = 6, ffn_hidden = 864,
              vocab = 1500, max_seq = 512 }
  prompt = 100
end

return scenario {
  name = "ops_prefill",
  description = "Prefill ops at odd shapes (hidden 2304, batch 3, prompt 1000)",
  model = m,
  hardware = "H100-SXM",
  workload = prefill { batch = 3, prompt = prompt, new_tokens = 24 },
  stacks = {
    step("bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+fusion", "fusion"),
  },
  execute = { layers = 1, warmup = 2,
              repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              -- short steps get more runs: medians of µs-long kernels settle
              min_time = opt.quick and 0 or 0.2 },
}
