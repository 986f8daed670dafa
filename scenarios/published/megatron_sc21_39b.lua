-- Megatron-LM SC21, Table 1: GPT 39B on 512 A100s (Selene, 80 GB), full activation
-- recompute, fp16. Configuration from Megatron-LM's examples/sc21/run_table_1.sh: TP 8, PP 2,
-- micro-batch 4, global batch 1536.
local cases = require "lib.cases"
return scenario {
  name = "megatron-sc21 39b",
  model = cases.megatron_gpt("megatron-39b", 48, 8192, 64),
  hardware = "A100-80GB",
  workload = train { batch = 4, seq = 2048, grad_accum = 12 },
  parallel = { tp = 8, pp = 2, dp = 32 },
  stacks = { step("published", "fp16", "recompute", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "megatron-sc21",
    citation = "Narayanan et al. 2021 (SC21), Table 1",
    url = "https://arxiv.org/abs/2104.04473",
    metric = "hardware_tflops_per_gpu", value = 138,
  },
}
