-- Megatron-LM SC21, Table 1: GPT 76B on 1,024 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "76b", layers = 60, hidden = 10240, heads = 80,
  tp = 8, pp = 4, micro = 2, global = 1792, gpus = 1024, interleave = 3, tflops = 140,
}
