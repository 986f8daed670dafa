// Turning the shared script arguments (--set, --module-path, --backend) into DslSettings, and
// listing a script's declared options for `perfsim run SCRIPT --help`.
#include <fmt/format.h>

#include <filesystem>

#include "cli/data_paths.hpp"
#include "cli/subcommands.hpp"
#include "core/report/text_table.hpp"

namespace perfsim {

DslSettings make_dsl_settings(const ScriptArgs& a, bool options_only) {
  DslSettings s;
  for (const std::string& kv : a.sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("--set expects NAME=VALUE, got '{}'", kv));
    s.overrides.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  s.module_path = a.module_path;
  s.options_only = options_only;
  // perfsim.measure{} inside a script measures on the backend the command line chose; with
  // --backend none there is none to choose, so scripts fall back to their own default.
  s.default_backend = a.backend == "none" ? "auto" : a.backend;
  s.unsafe = a.unsafe;
  s.timeout_s = a.timeout;
  s.output_dir = a.output_dir;
  // Scripts may read what the command line names: the script, a profile file, --set values
  // that are existing paths.
  std::error_code ec;
  s.readable_paths.push_back(a.scenario);
  if (!a.profile.empty() && std::filesystem::exists(a.profile, ec)) s.readable_paths.push_back(a.profile);
  for (const auto& [name, value] : s.overrides)
    if (!value.empty() && std::filesystem::exists(value, ec)) s.readable_paths.push_back(value);
  return s;
}

std::string describe_script_options(const ScriptArgs& given) {
  // A shipped scenario is found beside an installed binary, as run and explain find it.
  ScriptArgs a = given;
  a.scenario = find_data_path(a.scenario);
  const ScriptOutcome out = run_script(a.scenario, make_dsl_settings(a, true));
  if (out.options.empty()) return fmt::format("{} declares no options.\n", a.scenario);
  TextTable t;
  t.add_column("option", Align::left);
  t.add_column("type", Align::left);
  t.add_column("default", Align::left);
  t.add_column("description", Align::left);
  for (const ScriptOption& o : out.options)
    t.add_row({o.name, o.type, o.default_value, o.description});
  return fmt::format("Options declared by {} (set with --set NAME=VALUE):\n{}", a.scenario,
                     t.to_text(2));
}

}  // namespace perfsim
