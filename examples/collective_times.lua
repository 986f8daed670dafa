-- A plain script: how long an all-reduce of a model's gradients takes across GPUs, in one
-- node and across nodes (hardware.gpus_per_node, 8 for the HGX parts), as the
-- cost model prices it, on the datasheet H100-SXM (NVLink alpha-beta) and, with
-- `--set profile=NAME|FILE` (e.g. h200-local), on a calibrated profile: its measured times
-- per buffer size where it has a fit for that group of GPUs; inside the node, another group's
-- fit at equal bytes per rank; its links across nodes.
--   perfsim run examples/collective_times.lua
--   perfsim run examples/collective_times.lua --set profile=h200-local
local opt = options {
  profile = {"a calibrated profile file or name to price beside the datasheet ('' = none)", ""},
  collective = {"all_reduce, all_gather, reduce_scatter, all_to_all or send_recv", "all_reduce"},
}

local MiB = 1024 * 1024
local targets = { {"H100-SXM", "H100-SXM"} }
if opt.profile ~= "" then
  local p = profile(opt.profile)
  targets[#targets + 1] = {p.name, p}
end

-- Gradients of bf16 models: 2 bytes a parameter.
local buffers = {
  {"GPT-2 small (124M)", 124e6 * 2},
  {"Llama-3-8B, one layer (218M)", 218e6 * 2},
  {"64 MiB bucket", 64 * MiB},
  {"1 MiB", 1 * MiB},
}

-- One HGX node, then across nodes (16 and 64 GPUs: the ring crosses InfiniBand).
local GPUS = {2, 4, 8, 16, 64}

-- Every cell first, so that a bad option fails before anything is printed.
local lines = {}
for _, b in ipairs(buffers) do
  for _, t in ipairs(targets) do
    local cells = {}
    for _, gpus in ipairs(GPUS) do
      local s = perfsim.collective_time { collective = opt.collective, gpus = gpus, bytes = b[2], hardware = t[2] }
      -- '*': from the profile's measured times for this collective and group of GPUs;
      -- '~': from another group's, inside the node (the cost model reads them at equal bytes per rank).
      local fits = type(t[2]) == "table" and t[2].collectives and t[2].collectives[opt.collective]
      local mark = " "
      if fits and fits[gpus] then
        mark = "*"
      elseif fits and next(fits) then
        local per_node = t[2].gpus_per_node or 0
        if per_node <= 0 or gpus <= per_node then mark = "~" end
      end
      cells[#cells + 1] = string.format("%9.1f%s", s * 1e6, mark)
    end
    lines[#lines + 1] = string.format("%-30s  %-12s  %s", b[1], t[1], table.concat(cells, "  "))
  end
end

print(string.format("%s: predicted time per call (µs)", opt.collective))
local header = {}
for _, gpus in ipairs(GPUS) do header[#header + 1] = string.format("%9s ", gpus .. " GPUs") end
print(string.format("%-30s  %-12s  %s", "buffer", "hardware", table.concat(header, "  ")))
for _, line in ipairs(lines) do print(line) end
if opt.profile ~= "" then
  print("* from the profile's measured times for that group; ~ from another group's, at equal bytes per rank;")
  print("  other cells price its links (alpha-beta)")
end
