-- MosaicML llm-foundry training benchmarks: MPT-1b on 8 A100-80GB GPUs, the table's row as given.
return require("lib.cases").mpt_fsdp {
  size = "1b", layers = 24, hidden = 2048, heads = 16, hardware = "A100-80GB", tag = "a100",
  micro = 14, grad_accum = 4, tokens = 20513,
}
