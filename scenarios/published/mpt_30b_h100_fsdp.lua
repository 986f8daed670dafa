-- MosaicML llm-foundry training benchmarks: MPT-30b on 8 H100-SXM GPUs, the table's row as given.
return require("lib.cases").mpt_fsdp {
  size = "30b", layers = 48, hidden = 7168, heads = 64, hardware = "H100-SXM", tag = "h100",
  micro = 3, grad_accum = 21, checkpointing = true, tokens = 2002,
}
