-- Korthikanti et al. 2022, Table 5: GPT 530B on 280 A100s, full activation recompute.
-- Layout from the paper's Table 3; the interleaving as Calculon's validation/530B_*.json reads it.
return require("lib.cases").korthikanti {
  size = "530b", mode = "full", layers = 105, hidden = 20480, heads = 128,
  tp = 8, pp = 35, global = 280, interleave = 3, seconds = 49.05,
}
