-- Never ends: perfsim run --timeout stops it.
local n = 0
while true do end
