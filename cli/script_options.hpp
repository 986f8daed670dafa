// The options every command that loads a script shares: --set, --module-path, --backend and
// --profile, and the script's sandbox and limits (--output-dir, --timeout, --run-timeout,
// --unsafe; docs/DSL.md).
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace perfsim {

struct ScriptArgs;

// --set, --module-path, --backend (described by `backend_help`), --profile, then the sandbox's.
void add_script_options(CLI::App& cmd, ScriptArgs& a, const std::string& backend_help);
// --output-dir, --timeout, --run-timeout and --unsafe.
void add_sandbox_options(CLI::App& cmd, ScriptArgs& a);

// --format (table, md, markdown, json, csv; default from -o's extension) and -o FILE, for the
// commands that write a report (run, validate).
void add_report_options(CLI::App& cmd, std::string& format, std::string& output);

// Checks for CLI11 validators, so a bad value is a usage error: "" when `text` is acceptable,
// else what is wrong with it.
[[nodiscard]] std::string check_set(const std::string& text);      // --set NAME=VALUE
[[nodiscard]] std::string check_seconds(const std::string& text);  // a time limit: seconds >= 0

}  // namespace perfsim
