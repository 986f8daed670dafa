-- MosaicML llm-foundry training benchmarks: MPT-1b on 8 H100-SXM GPUs, sequence 2,048, FSDP
-- FULL_SHARD, bf16, flash attention, micro-batch 14, 1 micro-batches per step,
-- activation checkpointing off (the benchmark table's row, its columns read as given).
local cases = require "lib.cases"
return scenario {
  name = "mpt-1b h100 fsdp",
  model = cases.mpt("mpt-1b", 24, 2048, 16, 2048),
  hardware = "H100-SXM",
  workload = train { batch = 14, seq = 2048, grad_accum = 1 },
  parallel = { dp = 8, zero = 3 },
  stacks = { step("published", "bf16", "flash_attention", "fused_optimizer") },
  execute = { enabled = false },
  published = {
    source = "mpt-fsdp",
    citation = "MosaicML llm-foundry, MPT training benchmarks (scripts/train/benchmarking/README.md)",
    url = "https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md",
    metric = "tokens_per_s_per_gpu", value = 45455,
  },
}
