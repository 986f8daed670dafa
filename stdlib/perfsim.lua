-- perfsim.lua: the Lua half of the `perfsim` table (the C++ half holds predict, measure and
-- the catalogs): helpers for scripts that use the API directly and print their own results.
local perfsim = perfsim

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- perfsim.dump(value): a one-line rendering (tables with sorted keys), for printing.
function perfsim.dump(v, depth)
  depth = depth or 0
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "number" then return string.format("%.6g", v) end
  if type(v) ~= "table" then return tostring(v) end
  if depth > 4 then return "{...}" end
  local parts = {}
  local n = #v
  for i = 1, n do parts[#parts + 1] = perfsim.dump(v[i], depth + 1) end
  for _, k in ipairs(sorted_keys(v)) do
    if not (type(k) == "number" and k >= 1 and k <= n and k == math.floor(k)) then
      parts[#parts + 1] = tostring(k) .. " = " .. perfsim.dump(v[k], depth + 1)
    end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function cell(v)
  if v == nil then return "" end
  if type(v) == "number" then return string.format("%.4g", v) end
  if type(v) == "table" then return perfsim.dump(v) end
  return tostring(v)
end

-- perfsim.print_rows(rows [, columns]): prints rows of perfsim.predict/measure as an aligned
-- text table. Default columns: step, time, tokens_per_s, memory, fits, measured_time, error.
function perfsim.print_rows(rows, columns)
  columns = columns or {"step", "time", "tokens_per_s", "memory", "fits", "measured_time", "error"}
  local widths, cells = {}, {}
  for c, name in ipairs(columns) do widths[c] = #name end
  for r, row in ipairs(rows) do
    cells[r] = {}
    for c, name in ipairs(columns) do
      local text = cell(row[name])
      cells[r][c] = text
      if #text > widths[c] then widths[c] = #text end
    end
  end
  local function line(values)
    local out = {}
    for c, text in ipairs(values) do out[c] = text .. string.rep(" ", widths[c] - #text) end
    print((table.concat(out, "  "):gsub("%s+$", "")))
  end
  line(columns)
  for _, r in ipairs(cells) do line(r) end
end

return perfsim
