-- Megatron-LM SC21, Table 1: GPT 1T on 3072 A100s (Selene, 80 GB), full activation
-- recompute, fp16. Configuration from Megatron-LM's examples/sc21/run_table_1.sh: TP 8, PP 64,
-- micro-batch 1, global batch 3072.
local cases = require "lib.cases"
return scenario {
  name = "megatron-sc21 1t",
  model = cases.megatron_gpt("megatron-1t", 128, 25600, 160),
  hardware = "A100-80GB",
  workload = train { batch = 1, seq = 2048, grad_accum = 512 },
  parallel = { tp = 8, pp = 64, dp = 6 },
  stacks = { step("published", "fp16", "recompute", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "megatron-sc21",
    citation = "Narayanan et al. 2021 (SC21), Table 1",
    url = "https://arxiv.org/abs/2104.04473",
    metric = "hardware_tflops_per_gpu", value = 163,
  },
}
