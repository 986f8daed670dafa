-- Megatron-LM SC21, Table 1: GPT 145B on 1,536 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "145b", layers = 80, hidden = 12288, heads = 96,
  tp = 8, pp = 8, micro = 2, global = 2304, gpus = 1536, interleave = 2, tflops = 148,
}
