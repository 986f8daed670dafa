-- Weak scaling of a training step from 1 to 1,024 GPUs: every GPU keeps its micro-batch, data
-- parallelism with FSDP (ZeRO-3) spreads the training state, and the efficiency is tokens/s per
-- GPU against the smallest GPU count whose ranks fit. Where the curve bends, the columns say why:
-- the communication the step waits for grows as the groups cross nodes and lengthen their rings.
local options = options {
  model = {"model to scale", "llama-3-8b"},
  hardware = {"GPU (the catalog's GPUs per node and links)", "H100-SXM"},
  seq = {"tokens per sequence", 4096},
  grad_accum = {"micro-batches per step", 4},
}

local counts = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

local function predict(gpus)
  return perfsim.predict {
    model = model(options.model),
    hardware = options.hardware,
    workload = train { batch = 1, seq = options.seq, grad_accum = options.grad_accum },
    parallel = { gpus = gpus, zero = gpus > 1 and 3 or 0 },
    stacks = { step("bf16 + flash", "bf16", "flash_attention", "fused_optimizer") },
  }[1]
end

print(string.format("%s training, seq %d, %d micro-batches of 1 sequence per GPU, FSDP on %s (predicted)",
                    options.model, options.seq, options.grad_accum, options.hardware))
print(string.format("%6s  %10s  %12s  %10s  %6s  %10s  %10s  %10s  %s", "GPUs", "step", "tokens/s",
                    "tok/s/GPU", "MFU", "efficiency", "exposed", "mem/GPU", "fits"))
local base
for _, n in ipairs(counts) do
  local r = predict(n)
  if r.fits and not base then base = r.tokens_per_s_per_gpu end
  local efficiency = base and string.format("%9.1f%%", 100 * r.tokens_per_s_per_gpu / base) or "         —"
  print(string.format("%6d  %8.1f ms  %12.0f  %10.0f  %5.1f%%  %10s  %7.1f ms  %7.1f GB  %s", n, r.time * 1e3,
                      r.tokens_per_s, r.tokens_per_s_per_gpu, 100 * r.mfu, efficiency,
                      r.exposed_communication * 1e3, r.memory / 1e9, r.fits and "yes" or "no"))
end
print("efficiency: tokens/s per GPU against the smallest GPU count that fits")
print("exposed: communication the step waits for (FSDP's gathers and reduce-scatters not hidden by compute)")
