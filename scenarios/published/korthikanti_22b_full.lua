-- Korthikanti et al. 2022, Table 5: GPT 22B on 8 A100s, full activation recompute.
-- Layout from the paper's Table 3; the interleaving as Calculon's validation/22B_*.json reads it.
return require("lib.cases").korthikanti {
  size = "22b", mode = "full", layers = 48, hidden = 6144, heads = 64,
  tp = 8, pp = 1, global = 4, micro = 4, seconds = 1.42,
}
