-- MosaicML llm-foundry training benchmarks: MPT-1b on 8 H100-SXM GPUs, the table's row as given.
return require("lib.cases").mpt_fsdp {
  size = "1b", layers = 24, hidden = 2048, heads = 16, hardware = "H100-SXM", tag = "h100",
  micro = 14, grad_accum = 1, tokens = 45455,
}
