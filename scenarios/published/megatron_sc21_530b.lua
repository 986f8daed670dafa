-- Megatron-LM SC21, Table 1: GPT 530B on 2,520 A100s. Layout from Megatron-LM's
-- examples/sc21/run_table_1.sh (TP, PP, micro-batch, global batch, layers per virtual stage).
return require("lib.cases").megatron_sc21 {
  size = "530b", layers = 105, hidden = 20480, heads = 128,
  tp = 8, pp = 35, micro = 1, global = 2520, gpus = 2520, interleave = 3, tflops = 163,
}
