-- Megatron-LM SC21, Table 1: GPT 18B on 256 A100s (Selene, 80 GB), full activation
-- recompute, fp16. Configuration from Megatron-LM's examples/sc21/run_table_1.sh: TP 8, PP 1,
-- micro-batch 8, global batch 1024.
local cases = require "lib.cases"
return scenario {
  name = "megatron-sc21 18b",
  model = cases.megatron_gpt("megatron-18b", 40, 6144, 48),
  hardware = "A100-80GB",
  workload = train { batch = 8, seq = 2048, grad_accum = 4 },
  parallel = { tp = 8, pp = 1, dp = 32 },
  stacks = { step("published", "fp16", "recompute", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "megatron-sc21",
    citation = "Narayanan et al. 2021 (SC21), Table 1",
    url = "https://arxiv.org/abs/2104.04473",
    metric = "hardware_tflops_per_gpu", value = 135,
  },
}
