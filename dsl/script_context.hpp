// What the Lua API functions of one script run share: the settings, where the script lives,
// the options it declared and the scenarios it built. One context per lua_State.
#pragma once
#include <atomic>
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
  // The last line of the script that ran. `return scenario{...}` is a tail call, which removes
  // the script's frame; errors raised inside it are placed from this line (lua_state.cpp).
  // Atomic: the time limit's watchdog reads it to say where a script was stopped.
  std::atomic<int> last_line{0};
  // The message of the last ConfigError a perfsim function raised: a wrong value the message
  // names with its line and fix, so it is reported on one line, without a stack traceback.
  std::string config_error;
};

}  // namespace perfsim::dsl
