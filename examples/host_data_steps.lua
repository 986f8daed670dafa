-- A plain script: how much of a training step is data loading as the step shrinks? Predicts
-- the same stack (inputs uploaded from pageable memory -> pinned -> prefetched on a copy
-- stream) for several micro-batch sizes and prints each step's time and its slowdown against
-- inputs that are already on the device.
local base = step("pageable", "bf16", "flash_attention", "cuda_graphs")
local host_stack = { base, step("+pinned_memory", "pinned_memory"), step("+prefetch", "prefetch") }

local function predict(batch, host_data, stacks)
  return perfsim.predict {
    model = model("gpt2"),
    hardware = "H100-SXM",
    workload = train { batch = batch, seq = 128 },
    host_data = host_data,
    stacks = stacks,
  }
end

print("gpt2 training step, seq 128, bf16 + flash + CUDA graphs, on H100-SXM (predicted)")
print(string.format("%5s  %-16s  %10s  %s", "batch", "step", "time us", "vs data on device"))
for _, batch in ipairs({1, 8, 64}) do
  local on_device = predict(batch, false, { base })[1].time
  for _, row in ipairs(predict(batch, true, host_stack)) do
    print(string.format("%5d  %-16s  %10.1f  %+.1f%%", batch, row.step, row.time * 1e6,
                        (row.time / on_device - 1) * 100))
  end
end
