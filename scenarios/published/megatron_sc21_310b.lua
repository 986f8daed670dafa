-- Megatron-LM SC21, Table 1: GPT 310B on 1,920 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "310b", layers = 96, hidden = 16384, heads = 128,
  tp = 8, pp = 16, micro = 1, global = 2160, gpus = 1920, interleave = 2, tflops = 155,
}
