-- Korthikanti et al. 2022, Table 5: GPT 22B on 8 A100s, full activation recompute.
-- TP 8, PP 1, global batch 4 of micro-batch 4 (Table 3; the
-- interleaving as Calculon's validation/22B_*.json reads it).
local cases = require "lib.cases"
return scenario {
  name = "korthikanti 22b full",
  model = cases.megatron_gpt("megatron-22b", 48, 6144, 64),
  hardware = "A100-80GB",
  workload = train { batch = 4, seq = 2048, grad_accum = 1 },
  parallel = { tp = 8, pp = 1 },
  stacks = { step("published", "fp16", "recompute", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "korthikanti-2022",
    citation = "Korthikanti et al. 2022, Table 5",
    url = "https://arxiv.org/abs/2205.05198",
    metric = "step_time", value = 1.42,
  },
}
