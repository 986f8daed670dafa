-- Megatron-LM SC21, Table 1: GPT 1.7B on 32 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "1.7b", layers = 24, hidden = 2304, heads = 24,
  tp = 1, pp = 1, micro = 16, global = 512, gpus = 32, tflops = 137,
}
