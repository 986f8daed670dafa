// Building a Scenario from the fields of scenario{} (also perfsim.predict{} / measure{}):
// names resolved through the catalogs, consistency checks, and the sweep expanded.
#pragma once
#include <lua.hpp>

#include <optional>
#include <string>
#include <vector>

#include "dsl/script_context.hpp"

namespace perfsim::dsl {

// The fields scenario{} accepts.
[[nodiscard]] const std::vector<std::string>& scenario_fields();

// Reads the table at `index`; `what` names it in messages; `extra_fields` are accepted and
// ignored (e.g. "backend" for perfsim.measure{}). Throws ConfigError on inconsistent input.
[[nodiscard]] BuiltScenario build_scenario(lua_State* L, int index, const std::string& what,
                                           const std::vector<std::string>& extra_fields = {});

// The index into ScriptContext::scenarios of a table scenario{} returned, if it is one.
[[nodiscard]] std::optional<std::size_t> built_scenario_id(lua_State* L, int index);

}  // namespace perfsim::dsl
