-- Megatron-LM SC21, Table 1: GPT 1T on 3,072 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "1t", layers = 128, hidden = 25600, heads = 160,
  tp = 8, pp = 64, micro = 1, global = 3072, gpus = 3072, tflops = 163,
}
