-- A profile file that never finishes: perfsim stops reading it after 10 s (dsl/fresh_state.hpp).
while true do end
