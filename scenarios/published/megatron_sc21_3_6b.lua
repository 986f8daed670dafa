-- Megatron-LM SC21, Table 1: GPT 3.6B on 64 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "3.6b", layers = 30, hidden = 3072, heads = 32,
  tp = 2, pp = 1, micro = 16, global = 512, gpus = 64, tflops = 138,
}
