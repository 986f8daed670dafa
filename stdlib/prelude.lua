-- prelude.lua: globals every script sees besides the C++ constructors (scenario, model,
-- hardware, prefill, decode, train, options): step(), the named stacks, and sweep helpers.
require "perfsim"

local raise = perfsim._raise

local function describe(v)
  if type(v) == "string" then return "string '" .. v .. "'" end
  if type(v) == "number" or type(v) == "boolean" then return tostring(v) end
  return "a " .. type(v)
end

-- step(name, pass...): one cumulative step of a stack. A pass is an optimization name
-- ("bf16"), a list of names, or a table of value passes ({batch = 32}, {kv_cache = false}).
function step(name, ...)
  if type(name) ~= "string" then
    raise("step(name, pass...): the name must be a string such as \"+flash_attention\" (got "
          .. describe(name) .. ")")
  end
  local passes = {}
  for i = 1, select("#", ...) do
    local p = select(i, ...)
    if type(p) == "string" then
      passes[#passes + 1] = p
    elseif type(p) == "table" then
      for _, v in ipairs(p) do passes[#passes + 1] = v end
      local keys = {}
      for k in pairs(p) do
        if type(k) == "string" then keys[#keys + 1] = k end
      end
      table.sort(keys)  -- value passes in a stable order
      for _, k in ipairs(keys) do passes[#passes + 1] = {name = k, value = p[k]} end
    else
      raise("step('" .. name .. "'): pass " .. i .. " must be an optimization name or a table "
            .. "such as {batch = 32} (got " .. describe(p) .. ")")
    end
  end
  return perfsim._check_step {name = name, passes = passes}
end

-- stacks.<name>: the named stacks of stdlib/stacks.lua, loaded on first use.
stacks = setmetatable({}, {
  __index = function(_, name)
    local all = require "stacks"
    local s = all[name]
    if s == nil then
      local names = {}
      for k in pairs(all) do names[#names + 1] = k end
      table.sort(names)
      raise("unknown stack '" .. tostring(name) .. "'" .. perfsim._did_you_mean(tostring(name), names)
            .. "; known: " .. table.concat(names, ", "))
    end
    return s
  end,
})

-- range(a, b [, step]): a, a+step, ... up to b inclusive (like a numeric for loop).
function range(a, b, step_size)
  step_size = step_size or 1
  if type(a) ~= "number" or type(b) ~= "number" or type(step_size) ~= "number" then
    raise("range(a, b [, step]) expects numbers")
  end
  if step_size == 0 then raise("range(a, b, step): step must not be 0") end
  local out = {}
  for v = a, b, step_size do out[#out + 1] = v end
  return out
end

-- geomspace(a, b [, n]): without n, the powers of two a, 2a, 4a, ... up to b; with n, n
-- geometrically spaced values from a to b (rounded when a and b are whole numbers).
function geomspace(a, b, n)
  if type(a) ~= "number" or type(b) ~= "number" or a <= 0 or b <= 0 then
    raise("geomspace(a, b [, n]): a and b must be positive numbers")
  end
  local out = {}
  if n == nil then
    local v = a
    while v <= b * (1 + 1e-12) do
      out[#out + 1] = v
      v = v * 2
    end
    return out
  end
  if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then
    raise("geomspace(a, b, n): n must be a whole number >= 1 (got " .. describe(n) .. ")")
  end
  if n == 1 then return {a} end
  local whole = a == math.floor(a) and b == math.floor(b)
  for i = 0, n - 1 do
    local v = a * (b / a) ^ (i / (n - 1))
    if whole then v = math.floor(v + 0.5) end
    out[#out + 1] = v
  end
  return out
end

-- grid{batch = {1, 8}, prompt = {128, 512}}: every combination as a list of tables,
-- keys in alphabetical order with the last key varying fastest.
function grid(axes)
  if type(axes) ~= "table" then raise("grid{} expects a table of named lists") end
  local keys = {}
  for k, v in pairs(axes) do
    if type(k) ~= "string" then raise("grid{}: axes must be named, such as grid{batch = {1, 8}}") end
    if type(v) ~= "table" or #v == 0 then
      raise("grid{}: axis '" .. k .. "' must be a non-empty list")
    end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  local out = {{}}
  for _, k in ipairs(keys) do
    local next_out = {}
    for _, combo in ipairs(out) do
      for _, v in ipairs(axes[k]) do
        local c = {}
        for ck, cv in pairs(combo) do c[ck] = cv end
        c[k] = v
        next_out[#next_out + 1] = c
      end
    end
    out = next_out
  end
  return out
end

-- Serving traffic (serve{}): arrival processes and length distributions as tagged tables,
-- which serve{} checks field by field.
local function arrivals_of(kind, example)
  return function(t)
    if type(t) ~= "table" then
      raise(kind .. "{...} takes a table such as " .. example .. " (got " .. describe(t) .. ")")
    end
    local out = {}
    for k, v in pairs(t) do out[k] = v end
    out.kind = kind
    return out
  end
end
poisson = arrivals_of("poisson", "poisson{rate = 20}")
gamma = arrivals_of("gamma", "gamma{rate = 20, burstiness = 0.5}")
ramp = arrivals_of("ramp", "ramp{start_rate = 1, rate = 40}")
closed = arrivals_of("closed", "closed{users = 64, think = 0}")

-- trace "requests.jsonl" (or trace{file = ...}): arrivals and lengths from a file.
function trace(file)
  if type(file) == "table" then file = file.file end
  if type(file) ~= "string" then
    raise("trace takes a file name: trace \"requests.jsonl\" (got " .. describe(file) .. ")")
  end
  return {kind = "trace", file = file}
end

-- lengths{dist = "lognormal", mean = 512, max = 4096}: token counts drawn per request.
function lengths(t)
  if type(t) ~= "table" then
    raise("lengths{...} takes a table such as lengths{dist = \"lognormal\", mean = 512} (got " .. describe(t) .. ")")
  end
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  out.kind = "lengths"
  return out
end
