// The options of the commands that load a script, and the checks of their values.
#include "cli/script_options.hpp"

#include <exception>

#include <CLI/CLI.hpp>

#include "cli/subcommands.hpp"

namespace perfsim {

std::string check_set(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return "expects NAME=VALUE, got '" + text + "'";
  return {};
}

std::string check_seconds(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0 && v <= 1e9) return {};
  } catch (const std::exception&) {
  }
  return "expects seconds >= 0 (0: no limit), got '" + text + "'";
}

void add_report_options(CLI::App& cmd, std::string& format, std::string& output) {
  cmd.add_option("--format", format, "Report format (default: from -o's extension, else table)")
      ->check(CLI::IsMember({"table", "md", "markdown", "json", "csv"}));
  cmd.add_option("-o,--output", output, "Write the report to FILE (whole or not at all)")->type_name("FILE");
}

void add_sandbox_options(CLI::App& cmd, ScriptArgs& a) {
  cmd.add_option("--output-dir", a.output_dir, "Directory where the script's perfsim.write(name, text) puts its files")
      ->type_name("DIR");
  cmd.add_option("--timeout", a.timeout, "Stop a script still running after SECONDS (0: no limit)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(check_seconds, "", "timeout"))
      ->capture_default_str();
  cmd.add_option("--run-timeout", a.run_timeout,
                 "Stop the whole command after SECONDS: script, predictions, executed runs, writing "
                 "(0: no limit)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(check_seconds, "", "run-timeout"))
      ->capture_default_str();
  cmd.add_flag("--unsafe", a.unsafe,
               "Run the script without the sandbox: it may read and write any file (trusted scripts only)");
}

void add_script_options(CLI::App& cmd, ScriptArgs& a, const std::string& backend_help) {
  cmd.add_option("--set", a.sets, "Override a script option: --set NAME=VALUE (repeatable)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_set, "", "set"));
  cmd.add_option("--module-path", a.module_path,
                 "Directory searched first by require() (before $PERFSIM_PATH and the stdlib)")
      ->type_name("DIR");
  cmd.add_option("--backend", a.backend, backend_help)
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "none"}))
      ->capture_default_str();
  cmd.add_option("--profile", a.profile,
                 "Hardware profile that prices the executing device (without a backend: the "
                 "scenario's first hardware): a name (profiles/NAME.lua, see 'perfsim list "
                 "profiles'), a file written by 'perfsim calibrate', or 'datasheet' (default: "
                 "a calibrated profile of this device, else its catalog entry)")
      ->type_name("NAME|FILE");
  add_sandbox_options(cmd, a);
}

}  // namespace perfsim
