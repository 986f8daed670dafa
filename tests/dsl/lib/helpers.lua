-- Fixture module found through the script's directory (require "lib.helpers").
return { double = function(x) return 2 * x end }
