-- Megatron-LM SC21, Table 1: GPT 145B on 1536 A100s (Selene, 80 GB), full activation
-- recompute, fp16. Configuration from Megatron-LM's examples/sc21/run_table_1.sh: TP 8, PP 8,
-- micro-batch 2, global batch 2304, 2 model chunks per stage.
local cases = require "lib.cases"
return scenario {
  name = "megatron-sc21 145b",
  model = cases.megatron_gpt("megatron-145b", 80, 12288, 96),
  hardware = "A100-80GB",
  workload = train { batch = 2, seq = 2048, grad_accum = 48 },
  parallel = { tp = 8, pp = 8, dp = 24, interleave = 2 },
  stacks = { step("published", "fp16", "recompute", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "megatron-sc21",
    citation = "Narayanan et al. 2021 (SC21), Table 1",
    url = "https://arxiv.org/abs/2104.04473",
    metric = "hardware_tflops_per_gpu", value = 148,
  },
}
