-- Korthikanti et al. 2022, Table 5: GPT 1T on 512 A100s, full activation recompute.
-- Layout from the paper's Table 3; the interleaving as Calculon's validation/1T_*.json reads it.
return require("lib.cases").korthikanti {
  size = "1t", mode = "full", layers = 128, hidden = 25600, heads = 160,
  tp = 8, pp = 64, global = 512, seconds = 94.42,
}
