-- Fixture: a plain script using the API, with no scenario; it checks what it reads.
local names = perfsim.hardware_names()
assert(names[1] == "V100", "catalog order starts with V100")
assert(#perfsim.model_names() >= 13)
assert(type(perfsim.version) == "string")
local found = false
for _, o in ipairs(perfsim.optimizations()) do found = found or o.name == "flash_attention" end
assert(found, "flash_attention is an optimization")
local lib = require "lib.helpers"   -- from the script's directory
assert(lib.double(21) == 42)
