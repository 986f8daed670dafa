-- MosaicML llm-foundry training benchmarks: MPT-13b on 8 A100-80GB GPUs, sequence 2,048, FSDP
-- FULL_SHARD, bf16, flash attention, micro-batch 2, 3 micro-batches per step,
-- activation checkpointing off (the benchmark table's row, its columns read as given).
local cases = require "lib.cases"
return scenario {
  name = "mpt-13b a100 fsdp",
  model = cases.mpt("mpt-13b", 40, 5120, 40, 2048),
  hardware = "A100-80GB",
  workload = train { batch = 2, seq = 2048, grad_accum = 3 },
  parallel = { dp = 8, zero = 3 },
  stacks = { step("published", "bf16", "flash_attention", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "mpt-fsdp",
    citation = "MosaicML llm-foundry, MPT training benchmarks (scripts/train/benchmarking/README.md)",
    url = "https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md",
    metric = "tokens_per_s_per_gpu", value = 2262,
  },
}
