-- Which layout should Llama-3-70B train with on 256 H100s? perfsim.search ranks every layout of
-- the GPUs (tensor, pipeline and data parallel degrees, micro-batch, interleaving, ZeRO stage,
-- sequence parallelism, with and without full recompute) by predicted tokens/s at a fixed
-- global batch, and names what limits each. perfsim.predict then prices two of them in full:
-- the best, and the best without a pipeline, to show where the difference goes.
local opt = options {
  gpus = {"GPUs every layout spans", 256},
  hardware = {"GPU (the catalog's GPUs per node and links)", "H100-SXM"},
  seq = {"tokens per sequence", 8192},
  global_batch = {"sequences per step, the same for every layout", 256},
  top = {"layouts listed", 8},
}

-- The step to lay out: a table of scenario{} fields (a plain script, so no scenario{} call).
local stack = { step("bf16 + flash", "bf16", "flash_attention", "fused_optimizer") }
local base = {
  model = model("llama-3-70b"),
  hardware = opt.hardware,
  workload = train { batch = 1, seq = opt.seq },
  parallel = { gpus = opt.gpus, tp = 8, pp = 4 },  -- any layout of the GPUs; the search replaces it
  stacks = stack,
}

local best = perfsim.search { scenario = base, gpus = opt.gpus, global_batch = opt.global_batch,
                              top = 1000, recompute = true }
-- string.format pads bytes; layouts may hold "×" (two bytes), so pad by characters.
local function pad(text, width)
  local chars = #text - select(2, text:gsub("[\128-\191]", ""))
  return text .. string.rep(" ", width - chars)
end

local c = best.counts
print(string.format("%s training on %d %s, global batch %d × %d tokens (predicted)", best.model, best.gpus,
                    best.hardware, best.global_batch, opt.seq))
print(string.format("%d layouts enumerated, %d priced, %d fit memory", c.enumerated, c.evaluated, c.fitting))
local reasons = {}
for reason, n in pairs(c.pruned) do
  if n > 0 then reasons[#reasons + 1] = string.format("%s %d", reason, n) end
end
table.sort(reasons)
print("pruned: " .. table.concat(reasons, ", "))
print()
print(string.format("%3s  %s  %3s  %5s  %9s  %9s  %6s  %7s  %8s  %s", "#", pad("layout", 40), "mb", "accum",
                    "recompute", "tok/s/GPU", "MFU", "bubble", "mem/GPU", "limiter"))
for i = 1, math.min(opt.top, #best) do
  local r = best[i]
  print(string.format("%3d  %s  %3d  %5d  %9s  %9.0f  %5.1f%%  %6.1f%%  %5.1f GB  %s", r.rank, pad(r.describe, 40),
                      r.micro_batch, r.grad_accum, r.recompute and "full" or "-", r.tokens_per_s_per_gpu,
                      100 * r.mfu, 100 * r.bubble, r.memory / 1e9, r.limiter))
end

-- The best layout, and the best one without a pipeline stage (pp = 1), priced by perfsim.predict.
local function first(pred)
  for _, r in ipairs(best) do
    if r.fits and pred(r) then return r end
  end
end
local picks = { first(function() return true end), first(function(r) return r.layout.pp == 1 end) }

local function predict(r)
  local steps = { step("bf16 + flash", "bf16", "flash_attention", "fused_optimizer") }
  if r.recompute then steps[2] = step("+recompute", "recompute") end
  local rows = perfsim.predict {
    model = base.model,
    hardware = base.hardware,
    workload = train { batch = r.micro_batch, seq = opt.seq, grad_accum = r.grad_accum },
    parallel = r.layout,
    stacks = steps,
  }
  return rows[#rows]
end

print()
print("Two of them through perfsim.predict:")
print(string.format("%s  %9s  %9s  %6s  %9s  %9s  %9s  %8s", pad("layout", 40), "step", "tok/s/GPU", "MFU", "comm",
                    "exposed", "bubble", "mem/GPU"))
for _, r in ipairs(picks) do
  local p = predict(r)
  print(string.format("%s  %6.0f ms  %9.0f  %5.1f%%  %6.0f ms  %6.0f ms  %8.1f%%  %5.1f GB", pad(r.describe, 40),
                      p.time * 1e3, p.tokens_per_s_per_gpu, 100 * p.mfu, p.communication * 1e3,
                      p.exposed_communication * 1e3, 100 * p.bubble, p.memory / 1e9))
end
print("limiter: compute, memory (does not fit or < 5% free), bubble or communication (>= 5% of the step)")
print("comm: collectives of the rank that communicates most; exposed: the part the step waits for")
