-- Korthikanti et al. 2022, Table 5: GPT 175B on 64 A100s, selective recompute with sequence parallelism.
-- TP 8, PP 8, global batch 64 of micro-batch 1, 3 model chunks per stage (Table 3; the
-- interleaving as Calculon's validation/175B_*.json reads it).
local cases = require "lib.cases"
return scenario {
  name = "korthikanti 175b selective",
  model = cases.megatron_gpt("megatron-175b", 96, 12288, 96),
  hardware = "A100-80GB",
  workload = train { batch = 1, seq = 2048, grad_accum = 64 },
  parallel = { tp = 8, pp = 8, sp = true, interleave = 3 },
  stacks = { step("published", "fp16", {recompute = "selective"}, "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "korthikanti-2022",
    citation = "Korthikanti et al. 2022, Table 5",
    url = "https://arxiv.org/abs/2205.05198",
    metric = "step_time", value = 13.75,
  },
}
