-- Megatron-LM SC21, Table 1: GPT 18B on 256 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "18b", layers = 40, hidden = 6144, heads = 48,
  tp = 8, pp = 1, micro = 8, global = 1024, gpus = 256, tflops = 135,
}
