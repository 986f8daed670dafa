// What the Lua API functions of one script run share: the settings, where the script lives,
// the options it declared and the scenarios it built. One context per lua_State.
#pragma once
#include <string>
#include <vector>

#include "dsl/dsl.hpp"

namespace perfsim::dsl {

// A scenario built by scenario{} (or perfsim.predict{}): the base and its expanded sweep.
struct BuiltScenario {
  Scenario scenario;
  std::vector<ScenarioPoint> points;
};

struct ScriptContext {
  DslSettings settings;
  std::string file;                    // the script as given on the command line ("" for catalogs)
  std::string dir;                     // its directory, searched by require
  std::vector<ScriptOption> options;   // in declaration order
  bool options_declared = false;       // options{} was called
  std::vector<BuiltScenario> scenarios;  // every scenario{} call, in order
};

}  // namespace perfsim::dsl
