-- The same decode stack priced twice: on the calibrated H100 profile (tables fitted by
-- `perfsim calibrate` on an H100, stdlib/profiles/h100-local.lua) and on the datasheet
-- H100-SXM entry. Without a backend the first hardware is the prediction target and the
-- second a what-if: the report puts the two side by side.
--   perfsim run examples/calibrated_vs_datasheet.lua --backend none
return scenario {
  name = "calibrated_vs_datasheet",
  description = "Llama-3-8B decode on the calibrated H100 profile and on the datasheet",
  model = model "llama-3-8b",
  hardware = { profile "h100-local", "H100-SXM" },
  workload = decode { batch = 1, prompt = 512, new_tokens = 128 },
  stacks = stacks.decode_classic,
  execute = false,
}
