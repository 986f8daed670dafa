-- MosaicML llm-foundry training benchmarks: MPT-7b on 8 A100-80GB GPUs, the table's row as given.
return require("lib.cases").mpt_fsdp {
  size = "7b", layers = 32, hidden = 4096, heads = 32, hardware = "A100-80GB", tag = "a100",
  micro = 6, grad_accum = 2, tokens = 4641,
}
