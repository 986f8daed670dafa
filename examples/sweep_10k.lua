-- A plain script that predicts 10,000 configurations in a loop (5 models × 5 GPUs × 10 batch
-- sizes × 8 prompt lengths × 5 generation lengths) and prints how long that took, how many
-- configurations do not fit, and the fastest llama-3-8b configuration per GPU. It shows the
-- cost model is cheap enough for brute-force search.
local opt = options {
  limit = {"stop after this many combinations (0 = all 10,000)", 0},
}

local models = {"gpt2", "gpt2-medium", "gpt2-xl", "llama-2-7b", "llama-3-8b"}
local gpus = {"H100-SXM", "A100-80GB", "H200", "B200", "L4"}
local batches = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
local prompts = {32, 64, 96, 128, 192, 256, 384, 512}
local new_tokens = {16, 32, 64, 128, 256}

local stack = { step("bf16 + flash + graphs", "bf16", "flash_attention", "cuda_graphs") }
local zoo = {}
for _, name in ipairs(models) do zoo[name] = model(name) end

local target = "llama-3-8b"
local best = {}   -- gpu -> {tokens_per_s, what} of the fastest target configuration that fits
local count, too_big = 0, 0
local started = os.clock()
for _, m in ipairs(models) do
  for _, gpu in ipairs(gpus) do
    for _, b in ipairs(batches) do
      for _, p in ipairs(prompts) do
        for _, n in ipairs(new_tokens) do
          if opt.limit > 0 and count >= opt.limit then goto done end
          count = count + 1
          local row = perfsim.predict {
            model = zoo[m], hardware = gpu, stacks = stack,
            workload = decode { batch = b, prompt = p, new_tokens = n },
            execute = { layers = 1 },
          }[1]
          if not row.fits then
            too_big = too_big + 1
          elseif m == target and (best[gpu] == nil or row.tokens_per_s > best[gpu].tokens_per_s) then
            best[gpu] = { tokens_per_s = row.tokens_per_s,
                          what = string.format("batch=%d prompt=%d new_tokens=%d", b, p, n) }
          end
        end
      end
    end
  end
end
::done::
local elapsed = os.clock() - started

print(string.format("predicted %d combinations in %.2f s (%.1f µs each)", count, elapsed,
                    count > 0 and elapsed / count * 1e6 or 0))
print(string.format("%d of them do not fit in the GPU's memory", too_big))
print(string.format("fastest %s decode that fits, per GPU:", target))
for _, gpu in ipairs(gpus) do
  if best[gpu] then
    print(string.format("  %-10s %10.0f tokens/s  %s", gpu, best[gpu].tokens_per_s, best[gpu].what))
  end
end
