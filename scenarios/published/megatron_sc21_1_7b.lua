-- Megatron-LM SC21, Table 1: GPT 1.7B on 32 A100s (Selene, 80 GB), full activation
-- recompute, fp16. Configuration from Megatron-LM's examples/sc21/run_table_1.sh: TP 1, PP 1,
-- micro-batch 16, global batch 512.
local cases = require "lib.cases"
return scenario {
  name = "megatron-sc21 1.7b",
  model = cases.megatron_gpt("megatron-1.7b", 24, 2304, 24),
  hardware = "A100-80GB",
  workload = train { batch = 16, seq = 2048, grad_accum = 1 },
  parallel = { tp = 1, pp = 1, dp = 32 },
  stacks = { step("published", "fp16", "recompute", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "megatron-sc21",
    citation = "Narayanan et al. 2021 (SC21), Table 1",
    url = "https://arxiv.org/abs/2104.04473",
    metric = "hardware_tflops_per_gpu", value = 137,
  },
}
