-- Megatron-LM SC21, Table 1: GPT 7.5B on 128 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "7.5b", layers = 36, hidden = 4096, heads = 32,
  tp = 4, pp = 1, micro = 16, global = 512, gpus = 128, tflops = 142,
}
