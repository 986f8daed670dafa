-- Validation of speculative decoding in a decode step: Llama-3-8B at batch 1 and context 1152
-- (one sequence: the weights' bytes bound the step, verifying 5 tokens costs about what 1 does), plain decoding against one verify pass of 4 drafted tokens at acceptance 0.7 and
-- 0.4 (two layers executed and the rest scaled, lm_head whole). Its tok/s count the pass's
-- expected yield, (1 − α^5) / (1 − α) tokens a sequence; the pass itself is the same at any α.
-- `perfsim validate --quick` sets quick=true: a small Llama-style model sized for the CPU backend.
local opt = options {
  quick   = {"CPU-sized model and context (perfsim validate --quick)", false},
  batch   = {"sequences decoded together", 1},
  repeats = {"timed runs per step, at least (0: 10, or 3 with quick)", 0},
}

local m = model("llama-3-8b")
local prompt, new_tokens = 1024, 256
if opt.quick then
  m = model { name = "llama-quick", layers = 2, hidden = 256, heads = 8, kv_heads = 2,
              ffn_hidden = 768, vocab = 2048, max_seq = 512, activation = "swiglu",
              norm = "rmsnorm", rope = true }
  prompt, new_tokens = 96, 32
end

return scenario {
  name = "speculative_light",
  description = "Llama-3-8B decode at batch 1, plain then speculative (4 drafts, acceptance 0.7 and 0.4)",
  model = m,
  hardware = "H200-SXM",
  workload = decode { batch = opt.quick and math.min(opt.batch, 8) or opt.batch, prompt = prompt, new_tokens = new_tokens },
  stacks = {
    step("plain", "bf16", "flash_attention", "fusion", "cuda_graphs"),
    step("+speculative 0.7", {speculative = 4, acceptance = 0.7}),
    step("acceptance 0.4", {acceptance = 0.4}),
  },
  execute = { warmup = 2, repeats = opt.repeats > 0 and opt.repeats or (opt.quick and 3 or 10),
              min_time = opt.quick and 0 or 0.2 },
}
