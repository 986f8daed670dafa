-- MosaicML llm-foundry training benchmarks: MPT-13b on 8 H100-SXM GPUs, the table's row as given.
return require("lib.cases").mpt_fsdp {
  size = "13b", layers = 40, hidden = 5120, heads = 40, hardware = "H100-SXM", tag = "h100",
  micro = 2, grad_accum = 1, tokens = 4792,
}
