-- A plain script (no scenario): predict the same decode workload under two optimization
-- stacks and print them side by side. perfsim.predict returns one row per stack step.
local common = {
  model = model("llama-3-8b"),
  hardware = "H100-SXM",
  workload = decode { batch = 8, prompt = 1024, new_tokens = 256 },
}

local stacks = {
  latency = {
    step("bf16", "bf16"),
    step("+flash_attention", "flash_attention"),
    step("+cuda_graphs", "cuda_graphs"),
  },
  memory = {
    step("bf16", "bf16"),
    step("+fp8", "fp8"),
    step("+flash_attention", "flash_attention"),
  },
}

local function predict(stack)
  local args = { stacks = stack }
  for k, v in pairs(common) do args[k] = v end
  return perfsim.predict(args)
end

print("llama-3-8b decode, batch 8, context 1024+256, on H100-SXM (predicted)")
print(string.format("%-8s  %-18s  %10s  %10s  %10s  %s", "stack", "step", "time ms",
                    "tokens/s", "memory GB", "fits"))
for _, name in ipairs({"latency", "memory"}) do
  for _, row in ipairs(predict(stacks[name])) do
    print(string.format("%-8s  %-18s  %10.3f  %10.0f  %10.2f  %s", name, row.step,
                        row.time * 1e3, row.tokens_per_s, row.memory / 1e9,
                        row.fits and "yes" or "no"))
  end
end
