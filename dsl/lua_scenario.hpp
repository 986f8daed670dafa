// Building a Scenario from the fields of scenario{} (also perfsim.predict{} / measure{}):
// names resolved through the catalogs, consistency checks, and the sweep expanded.
#pragma once
#include <lua.hpp>

#include <optional>
#include <string>
#include <vector>

#include "dsl/lua_fields.hpp"
#include "dsl/script_context.hpp"

namespace perfsim::dsl {

// The fields scenario{} accepts.
[[nodiscard]] const std::vector<std::string>& scenario_fields();

// Reads the table at `index`; `what` names it in messages; `extra_fields` are accepted and
// ignored (e.g. "backend" for perfsim.measure{}). Throws ConfigError on inconsistent input.
[[nodiscard]] BuiltScenario build_scenario(lua_State* L, int index, const std::string& what,
                                           const std::vector<std::string>& extra_fields = {});

// The scenario in field `scenario` of the table `f` reads, for the API functions that take one
// (perfsim.search{}, perfsim.capacity{}): a table scenario{} returned (its first sweep point),
// or a table of scenario fields. `what` names the caller in errors.
[[nodiscard]] Scenario scenario_field(lua_State* L, const FieldReader& f, const char* what);

// The index into ScriptContext::scenarios of a table scenario{} returned, if it is one.
[[nodiscard]] std::optional<std::size_t> built_scenario_id(lua_State* L, int index);

}  // namespace perfsim::dsl
