-- MosaicML llm-foundry training benchmarks: MPT-30b on 8 A100-80GB GPUs, sequence 2,048, FSDP
-- FULL_SHARD, bf16, flash attention, micro-batch 3, 21 micro-batches per step,
-- activation checkpointing on (the benchmark table's row, its columns read as given).
local cases = require "lib.cases"
return scenario {
  name = "mpt-30b a100 fsdp",
  model = cases.mpt("mpt-30b", 48, 7168, 64, 2048),
  hardware = "A100-80GB",
  workload = train { batch = 3, seq = 2048, grad_accum = 21 },
  parallel = { dp = 8, zero = 3 },
  stacks = { step("published", "bf16", "flash_attention", "fused_optimizer", "recompute") },
  execute = { enabled = false },
  published = {
    source = "mpt-fsdp",
    citation = "MosaicML llm-foundry, MPT training benchmarks (scripts/train/benchmarking/README.md)",
    url = "https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md",
    metric = "tokens_per_s_per_gpu", value = 916,
  },
}
