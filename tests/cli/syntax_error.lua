-- CLI test fixture: a script Lua cannot parse, to check that the error names file and line.
local ok = 1
local broken = = 2
