-- Korthikanti et al. 2022, Table 5: GPT 530B on 280 A100s, selective recompute with sequence parallelism.
-- TP 8, PP 35, global batch 280 of micro-batch 1, 3 model chunks per stage (Table 3; the
-- interleaving as Calculon's validation/530B_*.json reads it).
local cases = require "lib.cases"
return scenario {
  name = "korthikanti 530b selective",
  model = cases.megatron_gpt("megatron-530b", 105, 20480, 128),
  hardware = "A100-80GB",
  workload = train { batch = 1, seq = 2048, grad_accum = 280 },
  parallel = { tp = 8, pp = 35, sp = true, interleave = 3 },
  stacks = { step("published", "fp16", {recompute = "selective"}, "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "korthikanti-2022",
    citation = "Korthikanti et al. 2022, Table 5",
    url = "https://arxiv.org/abs/2205.05198",
    metric = "step_time", value = 37.83,
  },
}
