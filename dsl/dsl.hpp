// Loading Lua scenario scripts. This is the only interface to Lua the rest of perfsim sees.
#pragma once
#include <cstddef>
#include <map>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "core/cost/hardware.hpp"
#include "core/passes/passes.hpp"
#include "core/run/scenario.hpp"
#include "core/config/model.hpp"

namespace perfsim {

// An option a script declares as `options = { name = {description, default} }`.
struct ScriptOption {
  std::string name;
  std::string description;
  std::string default_value;  // as text
  std::string type;           // "number", "string", "boolean" (from the default)
};

// One row of a sweep: the values of the sweep axes, and the scenario with them applied.
struct ScenarioPoint {
  std::map<std::string, std::string> values;  // empty when the scenario has no sweep
  Scenario scenario;
};

struct ScriptOutcome {
  std::vector<ScriptOption> options;          // declared options (for --help)
  std::optional<Scenario> scenario;           // returned or declared via scenario{...}
  std::vector<ScenarioPoint> points;          // the sweep expanded (one point without a sweep)
};

// Seconds a script, and the work it asks for, may run unless told otherwise (--timeout).
inline constexpr double default_script_timeout_s = 60;

struct DslSettings {
  std::vector<std::pair<std::string, std::string>> overrides;  // --set key=value
  std::string module_path;        // extra directory searched before the embedded stdlib
  bool options_only = false;      // load the script's options and stop (for --help)
  std::string default_backend = "auto";  // what perfsim.measure{} uses without `backend =`
  // false: perfsim.measure{} and perfsim.search{} are refused (the fuzz targets: a load must
  // stay fast, and run nothing)
  bool measure_and_search_allowed = true;
  // Sandbox and limits (docs/DSL.md, "Sandbox and limits").
  bool unsafe = false;            // --unsafe: scripts may write and read any file
  double timeout_s = default_script_timeout_s;  // --timeout: seconds a script may run; 0 = no limit
  std::size_t memory_limit = std::size_t{2} << 30;  // bytes of Lua memory; 0 = no limit
  std::string output_dir;         // --output-dir: where perfsim.write puts files ("" = refused)
  // Files and directories named on the command line, readable besides the script's directory
  // and the module path.
  std::vector<std::string> readable_paths;
};

// Runs `file`. Lua errors throw ScriptError with "file:line: message" and a traceback.
// Unknown names (hardware, model, optimization, option) get a "did you mean".
[[nodiscard]] ScriptOutcome run_script(const std::string& file, const DslSettings& settings = {});

struct ScriptError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Catalog access for the CLI (`perfsim list`) and tests: evaluated from the stdlib.
[[nodiscard]] std::vector<Hardware> hardware_catalog(const std::string& module_path = "");
[[nodiscard]] std::vector<ModelConfig> model_zoo(const std::string& module_path = "");
// Looks up by name, ignoring case; throws ConfigError with a suggestion.
[[nodiscard]] Hardware find_hardware(const std::string& name, const std::string& module_path = "");
[[nodiscard]] ModelConfig find_model(const std::string& name, const std::string& module_path = "");

// Profiles: hardware refined by `perfsim calibrate` (efficiency tables, launch costs, links).
// `name_or_path` is a file (it contains '/' or ends in ".lua") or a profile name looked up as
// profiles/<name>.lua in --module-path, $PERFSIM_PATH and the stdlib. Throws ConfigError
// naming the file and what is wrong.
[[nodiscard]] Hardware load_profile(const std::string& name_or_path,
                                    const std::string& module_path = "");
// Names of the profiles on the search path and in the stdlib (stdlib/profiles/*.lua), sorted.
[[nodiscard]] std::vector<std::string> profile_names(const std::string& module_path = "");
// Every profile file load_profile can find: those on the search path (--module-path,
// $PERFSIM_PATH), in search order, with their paths, then the stdlib's (path empty: load
// them by name). A name may appear more than once.
struct ProfileSource {
  std::string name;
  std::string path;
};
[[nodiscard]] std::vector<ProfileSource> profile_sources(const std::string& module_path = "");
// The readable Lua text of a profile (`return profile { ... }`) that load_profile reads back.
[[nodiscard]] std::string profile_to_lua(const Hardware& hw);

}  // namespace perfsim
