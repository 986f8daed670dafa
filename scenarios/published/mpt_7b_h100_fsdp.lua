-- MosaicML llm-foundry training benchmarks: MPT-7b on 8 H100-SXM GPUs, the table's row as given.
return require("lib.cases").mpt_fsdp {
  size = "7b", layers = 32, hidden = 4096, heads = 32, hardware = "H100-SXM", tag = "h100",
  micro = 6, grad_accum = 1, tokens = 10643,
}
