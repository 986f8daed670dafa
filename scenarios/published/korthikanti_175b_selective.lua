-- Korthikanti et al. 2022, Table 5: GPT 175B on 64 A100s, selective recompute with sequence parallelism.
-- Layout from the paper's Table 3; the interleaving as Calculon's validation/175B_*.json reads it.
return require("lib.cases").korthikanti {
  size = "175b", mode = "selective", layers = 96, hidden = 12288, heads = 96,
  tp = 8, pp = 8, global = 64, interleave = 3, seconds = 13.75,
}
