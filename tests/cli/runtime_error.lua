-- CLI test fixture: a script that fails at run time, to check the error line and traceback.
local function helper(x)
  return x.field.missing
end
helper({})
