-- MosaicML llm-foundry training benchmarks: MPT-13b on 8 A100-80GB GPUs, the table's row as given.
return require("lib.cases").mpt_fsdp {
  size = "13b", layers = 40, hidden = 5120, heads = 40, hardware = "A100-80GB", tag = "a100",
  micro = 2, grad_accum = 3, tokens = 2262,
}
