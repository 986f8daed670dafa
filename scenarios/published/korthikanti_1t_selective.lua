-- Korthikanti et al. 2022, Table 5: GPT 1T on 512 A100s, selective recompute with sequence parallelism.
-- TP 8, PP 64, global batch 512 of micro-batch 1 (Table 3; the
-- interleaving as Calculon's validation/1T_*.json reads it).
local cases = require "lib.cases"
return scenario {
  name = "korthikanti 1t selective",
  model = cases.megatron_gpt("megatron-1t", 128, 25600, 160),
  hardware = "A100-80GB",
  workload = train { batch = 1, seq = 2048, grad_accum = 512 },
  parallel = { tp = 8, pp = 64, sp = true },
  stacks = { step("published", "fp16", {recompute = "selective"}, "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "korthikanti-2022",
    citation = "Korthikanti et al. 2022, Table 5",
    url = "https://arxiv.org/abs/2205.05198",
    metric = "step_time", value = 71.49,
  },
}
