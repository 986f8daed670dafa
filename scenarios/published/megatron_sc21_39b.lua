-- Megatron-LM SC21, Table 1: GPT 39B on 512 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "39b", layers = 48, hidden = 8192, heads = 64,
  tp = 8, pp = 2, micro = 4, global = 1536, gpus = 512, tflops = 138,
}
